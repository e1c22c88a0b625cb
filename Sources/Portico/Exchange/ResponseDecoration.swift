import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

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
        if let status = exchange.cacheStatus { head.headers.add(name: "Cache-Status", value: status) }
        exchange.cors?.decorate(&head.headers)
        if let limit = exchange.rateLimit {
            head.headers.add(name: "RateLimit-Policy", value: limit.policyField)
            head.headers.add(name: "RateLimit", value: limit.statusField)
        }
        if let trace = exchange.trace {
            // The client learns its trace only if the policy says so; a backend's own trace
            // fields, which name spans the client has no business with, never reach it (``head(_:for:closing:)``
            // left them out).
            if trace.answersTraceparent { head.headers.add(name: "traceparent", value: trace.fields.traceparent) }
        }
        if closing && !head.headers.contains(name: "connection") { head.headers.add(name: "Connection", value: "close") }
    }

    /// A handler's response head (a backend's, or the gateway's own answer) as the client gets it:
    /// the backend's fields the gateway passes on, then the decoration. Recorded as the response's start.
    static func head(_ upstream: UpstreamResponseHead, for exchange: Exchange, closing: Bool) -> HTTPResponseHead {
        var head = ProxyForwarding.responseHead(upstream, version: exchange.head.version, traced: exchange.trace != nil)
        decorate(&head, for: exchange, closing: closing)
        exchange.outcome.status = head.status.code
        exchange.outcome.responseStarted = true
        return head
    }

    /// A problem as the exchange's whole answer: its decorated head and its body, recorded in the outcome.
    /// A gRPC call gets it in gRPC's Trailers-Only form (``GRPCAnswer``), with no body; the
    /// outcome keeps the problem's status for the access log and metrics.
    static func answer(_ problem: Problem, for exchange: Exchange, closing: Bool) -> (HTTPResponseHead, ByteBuffer) {
        var body = problem.body(requestID: exchange.requestID)
        var head = problem.head(requestID: exchange.requestID, contentLength: body.readableBytes, version: exchange.head.version)
        decorate(&head, for: exchange, closing: closing)
        if GRPCAnswer.isGRPC(exchange.head) {
            head = GRPCAnswer.head(replacing: head, problemTitle: problem.title)
            body.clear()
        }
        exchange.outcome.status = problem.status.code
        exchange.outcome.bytesSent = body.readableBytes
        exchange.outcome.problemType = problem.type
        return (head, body)
    }

    /// The answer to bytes the decoder refused, which closes the connection: undecorated (nothing
    /// is known of the request but, if it had begun, its id), and recorded in the outcome of the
    /// exchange that broke off, if any.
    static func refusal(_ problem: Problem, of exchange: Exchange?) -> (HTTPResponseHead, ByteBuffer) {
        let requestID = exchange?.requestID ?? RequestID.generate()
        let body = problem.body(requestID: requestID)
        if let exchange {
            exchange.outcome.status = problem.status.code
            exchange.outcome.bytesSent = body.readableBytes
            exchange.outcome.failure = "the request could not be parsed"
        }
        return (problem.head(requestID: requestID, contentLength: body.readableBytes), body)
    }
}
