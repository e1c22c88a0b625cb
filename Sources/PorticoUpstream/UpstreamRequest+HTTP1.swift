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
    /// The head is checked here, as it is put together (``WireSyntax``), rather than by a channel
    /// handler on every connection: a method that is not a token, a request-target with a byte it
    /// cannot carry, a field name that is not a token or a value with a control byte (a CR LF that
    /// would start a second request) makes no head at all.
    ///
    /// - Returns: the head, and whether the request allows keep-alive (no `Connection: close`);
    ///   nil when the request cannot be written as it is.
    func http1Head(for target: UpstreamOrigin.Parsed) -> (head: HTTPRequestHead, keepAlive: Bool)? {
        guard HeaderName.isToken(self.method), WireSyntax.isRequestTarget(target.requestTarget) else { return nil }
        let method = HTTPMethod(rawValue: self.method)
        var headers = self.headers
        var hasHost = false
        var keepAlive = true
        var hasFraming = false
        for (name, value) in headers {
            guard WireSyntax.isField(name: name, value: value) else { return nil }
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
        if !hasHost {
            let host = String(target.authority)
            guard WireSyntax.isFieldValue(host) else { return nil }
            headers.replaceOrAdd(name: "Host", value: host)
        }
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

extension HTTPRequestHead {
    /// Whether the head can be written on an HTTP/1.1 connection as it is (``WireSyntax``): the
    /// check ``UpstreamRequest/http1Head(for:)`` makes as it goes, for a head made elsewhere.
    var isSendable: Bool {
        HeaderName.isToken(method.rawValue) && WireSyntax.isRequestTarget(uri) && headers.areSendable
    }
}

extension HTTPHeaders {
    /// Whether every field can be written on an HTTP/1.1 connection as it is: its name a token,
    /// its value without a control byte (``WireSyntax``). The gateway checks the heads it writes
    /// where they are made or received, instead of through NIO's validating channel handlers.
    public var areSendable: Bool {
        allSatisfy { WireSyntax.isField(name: $0.name, value: $0.value) }
    }
}

extension UpstreamError {
    /// A request whose head fails ``WireSyntax``'s checks: it is not sent (the gateway answers 502).
    /// Its twin for response heads is ``ResponseFraming/unsendableHead``.
    static let unsendableRequest = UpstreamError(
        .invalidRequest, detail: "the request's method, target or a header field holds bytes HTTP/1.1 cannot carry")
}
