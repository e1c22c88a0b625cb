/// Which ``UpstreamClient`` implementation a request goes through (see ``RoutingUpstreamClient``).
public enum UpstreamClientKind: String, Sendable, Hashable, CaseIterable {
    /// ``NIOUpstreamClient``: HTTP/1.1 on the caller's event loop; `http://` only.
    case nio
    /// ``CurlUpstreamClient``: libcurl on its own threads; `http://` and `https://`.
    case curl
}
