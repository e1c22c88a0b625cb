import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoTLS

/// The first stage: what makes a head unacceptable whatever it asks for.
///
/// RFC 9112 §3.2's `Host` rules, and a `Content-Length` over the policy's `maxBodyBytes`, refused
/// before the body is read (a chunked body crossing the limit is refused as it arrives). On a TLS
/// listener with several certificates, a `Host` that would select another certificate than the
/// connection's SNI did is misdirected (421): the client reused a connection meant for another
/// server, and mutual-TLS or certificate-bound rules of that server never applied to it.
struct HeadChecksStage: RequestStage {
    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        if let problem = Self.checkHost(exchange.head) { return .answer(problem) }
        if let certificate = exchange.client.certificate, certificate.hasAlternatives,
            let host = exchange.head.headers.first(name: "host"),
            !certificate.isSelected(byHost: String(Route.hostWithoutPort(host)))
        {
            return .answer(.misdirectedRequest())
        }
        let limit = exchange.snapshot.limits.maxBodyBytes
        if let length = exchange.framing.declaredLength, length > limit { return .answer(.bodyTooLarge(limit: limit)) }
        return .proceed
    }

    /// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one `Host` field, an HTTP/1.0 one at most
    /// one; its value is a URI authority (RFC 3986 §3.2.2), possibly empty.
    static func checkHost(_ head: HTTPRequestHead) -> Problem? {
        var count = 0
        var value = ""
        // By index, a value read only where the name is `Host` (pairs copied every value).
        let fields = head.headers
        for index in fields.indices where HeaderName.matches(fields[index].name, "host") {
            count += 1
            value = fields[index].value
        }
        if count > 1 { return .badRequest("The request has \(count) Host fields; send exactly one.") }
        if count == 0 && head.version == .http1_1 { return .badRequest("An HTTP/1.1 request must carry a Host field.") }
        let allowed = value.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default:
                "-._~!$&'()*+,;=:[]%".utf8.contains(byte)
            }
        }
        guard allowed, hasValidPort(value) else {
            return .badRequest("The Host field is not a valid authority (a host name or address and an optional port).")
        }
        return nil
    }

    /// Whether the authority's port, if it has one, is decimal digits within 0...65535 (RFC 3986
    /// §3.2.3). Only an IP literal, in brackets, holds colons (and brackets) of its own; a port
    /// follows its `]`.
    private static func hasValidPort(_ authority: String) -> Bool {
        let utf8 = authority.utf8
        let portStart: String.UTF8View.Index
        if utf8.first == UInt8(ascii: "[") {
            guard let close = utf8.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let after = utf8.index(after: close)
            if after == utf8.endIndex { return true }
            guard utf8[after] == UInt8(ascii: ":") else { return false }
            portStart = utf8.index(after: after)
        } else {
            guard !utf8.contains(UInt8(ascii: "[")), !utf8.contains(UInt8(ascii: "]")) else { return false }
            guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")) else { return true }
            portStart = utf8.index(after: colon)
        }
        let port = utf8[portStart...]
        // An empty port is allowed (`port = *DIGIT`); more than five digits never names one.
        guard !port.isEmpty else { return true }
        return DecimalDigits.value(of: port, maxDigits: 5).map { $0 <= 65535 } ?? false
    }
}
