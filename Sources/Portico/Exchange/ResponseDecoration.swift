import NIOHTTP1
import PorticoPolicy

/// The response-decoration stage: what the gateway adds to every answer it sends for an exchange,
/// whoever wrote the rest (a backend, or the gateway's own problem).
///
/// `X-Request-Id` (so a client can quote it), `X-API-Version` once the version stage has chosen
/// one, `Vary` on the client fields that chose it (so a cache keeps one answer per bucket), the `RateLimit-Policy` and `RateLimit` fields of the limit that admitted the request, and
/// `Connection: close` when the connection ends with this answer.
enum ResponseDecoration {
    static func decorate(_ head: inout HTTPResponseHead, for exchange: Exchange, closing: Bool) {
        if !head.headers.contains(name: "x-request-id") { head.headers.add(name: "X-Request-Id", value: exchange.requestID) }
        if let version = exchange.version { head.headers.add(name: "X-API-Version", value: String(version)) }
        // A field of its own beside any `Vary` of the backend's: recipients combine them (RFC 9110 §5.3).
        if let vary = exchange.vary { head.headers.add(name: "Vary", value: vary) }
        if let limit = exchange.rateLimit {
            head.headers.add(name: "RateLimit-Policy", value: limit.policyField)
            head.headers.add(name: "RateLimit", value: limit.statusField)
        }
        if closing && !head.headers.contains(name: "connection") { head.headers.add(name: "Connection", value: "close") }
    }
}
