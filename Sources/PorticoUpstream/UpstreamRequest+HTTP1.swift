import NIOCore
import NIOHTTP1
import PorticoHTTP

extension UpstreamRequest {
    /// The request head the NIO client writes: the caller's fields unchanged, plus framing.
    ///
    /// The caller has decided every field; the client owns only the message's framing (RFC 9112
    /// §6): `Content-Length` for a body; `Content-Length: 0` for an empty POST, PUT or PATCH (whose
    /// methods anticipate content, RFC 9110 §8.6); nothing for other requests without a body (a GET
    /// with `Content-Length: 0` puzzles some servers). Any `Content-Length` or `Transfer-Encoding`
    /// the caller passed is dropped, since two framings disagreeing is how requests get smuggled.
    /// A request without `Host` gets one from the URL, as HTTP/1.1 requires (RFC 9112 §3.2).
    ///
    /// - Returns: the head, and whether the request allows keep-alive (no `Connection: close`).
    func http1Head(for target: UpstreamOrigin.Parsed) -> (head: HTTPRequestHead, keepAlive: Bool) {
        let method = HTTPMethod(rawValue: self.method)
        var headers = self.headers
        var hasHost = false
        var keepAlive = true
        var hasFraming = false
        for (name, value) in headers {
            switch name.utf8.count {
            case 4 where HeaderName.matches(name, "host"):
                hasHost = true
            case 10 where HeaderName.matches(name, "connection"):
                if Self.listsClose(value) { keepAlive = false }
            case 14 where HeaderName.matches(name, "content-length"), 17 where HeaderName.matches(name, "transfer-encoding"):
                hasFraming = true
            default:
                break
            }
        }
        if hasFraming {
            headers.remove(name: "content-length")
            headers.remove(name: "transfer-encoding")
        }
        if !hasHost { headers.replaceOrAdd(name: "Host", value: String(target.authority)) }
        let length = body?.readableBytes ?? 0
        if length > 0 {
            headers.add(name: "Content-Length", value: String(length))
        } else {
            switch method {
            case .POST, .PUT, .PATCH: headers.add(name: "Content-Length", value: "0")
            default: break
            }
        }
        return (HTTPRequestHead(version: .http1_1, method: method, uri: target.requestTarget, headers: headers), keepAlive)
    }

    /// Whether a `Connection` field value holds the `close` option.
    private static func listsClose(_ value: String) -> Bool {
        for token in value.split(separator: ",") where HeaderName.matches(String(token.trimmingOptionalWhitespace()), "close") {
            return true
        }
        return false
    }
}
