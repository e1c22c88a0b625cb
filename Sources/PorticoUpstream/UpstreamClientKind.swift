/// Which ``UpstreamClient`` implementation a request goes through (see ``RoutingUpstreamClient``).
public enum UpstreamClientKind: String, Sendable, Hashable, CaseIterable {
    /// ``NIOUpstreamClient``: HTTP/1.1 on the caller's event loop; `http://` only.
    case nio
    /// ``CurlUpstreamClient``: libcurl on its own threads; `http://` and `https://`.
    case curl
    /// ``HTTP2UpstreamClient``: HTTP/2 on the caller's event loop, `h2c` for `http://`, `h2` (TLS
    /// with ALPN) for `https://`.
    case http2
}
