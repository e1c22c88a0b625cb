import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

/// What the `proxy` handler sends upstream and what it passes back, per RFC 9110 §7.6.
enum ProxyForwarding {
    /// Hop-by-hop fields (RFC 9110 §7.6.1 and the historical ones proxies still see).
    static let hopByHop = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization",
    ]

    /// Request fields the gateway sets itself (or, for `expect`, has already answered) instead of
    /// passing on.
    static let replacedOnRequest = [
        "host", "content-length", "x-forwarded-proto", "x-forwarded-host", "x-request-id", "expect",
    ]

    /// Response fields the gateway sets itself. `Content-Length` is among them: the client's framing
    /// is the gateway's own, from the length the upstream client checked (or chunked by NIO), never
    /// the backend's field as sent, which could be a list, repeated, or padded with zeros.
    static let replacedOnResponse = ["x-request-id", "x-api-version", "content-length"]

    /// Field names listed in `Connection` values (RFC 9110 §7.6.1), lowercased; `close` and
    /// `keep-alive` are left out since they are dropped anyway.
    static func connectionListed(_ values: [String]) -> [String] {
        var listed: [String] = []
        for value in values {
            for token in value.split(separator: ",") {
                let name = token.trimmingOptionalWhitespace()
                if name.isEmpty || HeaderName.matches(String(name), "close") || HeaderName.matches(String(name), "keep-alive") { continue }
                listed.append(name.lowercased())
            }
        }
        return listed
    }

    /// Path and query the backend receives: the backend's base path, then the rewritten prefix
    /// (or the original path when the policy sets no rewrite), then the request's query unchanged.
    static func upstreamTarget(_ routed: RoutedRequest, proxy: ProxyPolicy, backend: BackendPolicy) -> String {
        var path = backend.url.basePath
        if let rewrite = proxy.rewrite {
            path += rewrite
            path += routed.remainder
        } else {
            path += routed.path
        }
        if path.isEmpty { path = "/" }
        if let query = routed.query { path += "?" + query }
        return path
    }

    static func upstreamRequest(
        head: HTTPRequestHead, body: ByteBuffer?, routed: RoutedRequest, proxy: ProxyPolicy, backend: BackendPolicy,
        clientAddress: String?, scheme: String, requestID: String, dropping credentialHeader: String? = nil
    ) -> UpstreamRequest {
        let listed = connectionListed(head.headers.filter { HeaderName.matches($0.name, "connection") }.map(\.value))
        var headers = HTTPHeaders()
        headers.reserveCapacity(head.headers.count + 5)
        var forwardedFor: String?
        for (name, value) in head.headers {
            if HeaderName.matches(name, "x-forwarded-for") {
                forwardedFor = forwardedFor.map { "\($0), \(value)" } ?? value
                continue
            }
            if HeaderName.matchesAny(name, hopByHop) || HeaderName.matchesAny(name, replacedOnRequest) { continue }
            if !listed.isEmpty && HeaderName.matchesAny(name, listed) { continue }
            if let credentialHeader, HeaderName.matches(name, credentialHeader) { continue }
            headers.add(name: name, value: value)
        }
        if let clientAddress {
            forwardedFor = forwardedFor.map { "\($0), \(clientAddress)" } ?? clientAddress
        }
        let url = backend.url
        let defaultPort = url.scheme == "https" ? 443 : 80
        headers.add(name: "Host", value: url.port == defaultPort ? url.hostForURL : "\(url.hostForURL):\(url.port)")
        if let forwardedFor { headers.add(name: "X-Forwarded-For", value: forwardedFor) }
        headers.add(name: "X-Forwarded-Proto", value: scheme)
        if let host = head.headers.first(name: "host") { headers.add(name: "X-Forwarded-Host", value: host) }
        headers.add(name: "X-Request-Id", value: requestID)

        let target = upstreamTarget(routed, proxy: proxy, backend: backend)
        var request = UpstreamRequest(
            method: head.method.rawValue, url: "\(url.scheme)://\(url.hostForURL):\(url.port)\(target)", headers: headers,
            body: body, connectTimeout: backend.connectTimeout, timeout: backend.timeout)
        request.client = backend.client.map(UpstreamClientKind.init)
        return request
    }

    /// The response head sent to the client: the backend's end-to-end fields, before
    /// ``ResponseDecoration`` adds the gateway's own.
    ///
    /// Framing: `Content-Length` is the backend's checked length (``UpstreamResponseHead/contentLength``),
    /// which the body either matches or is cut short of, so the client sees a cut; without one, NIO
    /// frames the body chunked (HTTP/1.1) or the connection's close ends it (HTTP/1.0). NIO also
    /// drops the length from 204 and 304 answers and sends no body after HEAD.
    static func responseHead(_ upstream: UpstreamResponseHead, version: HTTPVersion) -> HTTPResponseHead {
        let listed = connectionListed(upstream.headers.filter { HeaderName.matches($0.name, "connection") }.map(\.value))
        var headers = HTTPHeaders()
        headers.reserveCapacity(upstream.headers.count + 5)
        for (name, value) in upstream.headers {
            if HeaderName.matchesAny(name, hopByHop) || HeaderName.matchesAny(name, replacedOnResponse) { continue }
            if !listed.isEmpty && HeaderName.matchesAny(name, listed) { continue }
            headers.add(name: name, value: value)
        }
        if let length = upstream.contentLength { headers.add(name: "Content-Length", value: String(length)) }
        return HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: upstream.status), headers: headers)
    }
}
