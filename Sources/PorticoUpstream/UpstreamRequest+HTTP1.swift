import NIOCore
import NIOHTTP1
import PorticoHTTP

extension UpstreamRequest {
    /// The request head the NIO client writes, as the bytes that go on the wire: the caller's
    /// fields unchanged, plus framing.
    ///
    /// The caller has decided every field; the client owns only the message's framing (RFC 9112
    /// §6): `Content-Length` for a body; `Content-Length: 0` for an empty POST, PUT or PATCH (whose
    /// methods anticipate content, RFC 9110 §8.6); nothing for other requests without a body (a GET
    /// with `Content-Length: 0` puzzles some servers). Any `Content-Length` or `Transfer-Encoding`
    /// the caller passed is dropped, since two framings disagreeing is how requests get smuggled.
    /// A request without `Host` gets one from the URL, as HTTP/1.1 requires (RFC 9112 §3.2).
    ///
    /// The fields are already the lines they are sent as (``FieldLines``), checked as they were
    /// added: without framing fields among them, which is the rule, they are copied in one piece.
    /// No `HTTPRequestHead` is made and no NIO encoder runs: the connection has no handler between
    /// it and the socket (``HTTP1ResponseDecoder`` says why).
    ///
    /// The head is checked, rather than by a channel handler on every connection: a method that
    /// is not a token, a request-target with a byte it cannot carry, or a field HTTP/1.1 cannot
    /// carry (``FieldLines/isSendable``; a CR LF that would start a second request) makes no head.
    ///
    /// - Returns: the head's bytes, and whether the request allows keep-alive (no `Connection:
    ///   close`); nil when the request cannot be written as it is.
    func http1Head(for target: UpstreamOrigin.Parsed) -> (head: ByteBuffer, keepAlive: Bool)? {
        guard headers.isSendable, HeaderName.isToken(self.method), WireSyntax.isRequestTarget(target.target) else {
            return nil
        }
        var head = ByteBuffer()
        head.reserveCapacity(96 + self.method.utf8.count + target.target.utf8.count + headers.bytes.count)
        head.writeString(self.method)
        head.writeInteger(UInt8(ascii: " "))
        if target.slashFirst { head.writeInteger(UInt8(ascii: "/")) }
        head.writeSubstring(target.target)
        head.writeStaticString(" HTTP/1.1\r\n")
        if headers.hasFraming {
            for (name, value) in headers where !FieldLines.isFraming(name) { Self.write(name: name, value: value, to: &head) }
        } else {
            head.writeBytes(headers.bytes)
        }
        if !headers.hasHost {
            let host = String(target.authority)
            guard WireSyntax.isFieldValue(host) else { return nil }
            Self.write(name: "Host", value: host, to: &head)
        }
        let length = body?.readableBytes ?? 0
        if length > 0 {
            head.writeStaticString("Content-Length: ")
            head.writeString(String(length))
            head.writeStaticString("\r\n")
        } else {
            switch self.method {
            case "POST", "PUT", "PATCH": head.writeStaticString("Content-Length: 0\r\n")
            default: break
            }
        }
        head.writeStaticString("\r\n")
        return (head, !headers.listsClose)
    }

    private static func write(name: String, value: String, to head: inout ByteBuffer) {
        head.writeString(name)
        head.writeStaticString(": ")
        head.writeString(value)
        head.writeStaticString("\r\n")
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
