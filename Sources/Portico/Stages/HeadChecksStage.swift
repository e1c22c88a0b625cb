import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

/// The first stage: what makes a head unacceptable whatever it asks for.
///
/// RFC 9112 §3.2's `Host` rules, and a `Content-Length` over the policy's `maxBodyBytes`, refused
/// before the body is read (a chunked body crossing the limit is refused as it arrives).
struct HeadChecksStage: RequestStage {
    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        if let problem = Self.checkHost(exchange.head) { return .answer(problem) }
        let limit = exchange.snapshot.limits.maxBodyBytes
        if let length = exchange.declaredLength, length > limit { return .answer(.bodyTooLarge(limit: limit)) }
        return .proceed
    }

    /// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one `Host` field, an HTTP/1.0 one at most
    /// one; its value is a URI authority (RFC 3986 §3.2.2), possibly empty.
    static func checkHost(_ head: HTTPRequestHead) -> Problem? {
        var count = 0
        var value = ""
        for (name, fieldValue) in head.headers where HeaderName.matches(name, "host") {
            count += 1
            value = fieldValue
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
        return allowed ? nil : .badRequest("The Host field is not a valid authority (a host name or address and an optional port).")
    }
}
