import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoUpstream

/// The response-decoration stage: what the gateway adds to every answer it sends for an exchange,
/// whoever wrote the rest (a backend, or the gateway's own problem).
///
/// `X-Request-Id` (so a client can quote it), `X-API-Version` once the version stage has chosen
/// one, `Vary` on the client fields that chose it (so a cache keeps one answer per bucket), the `RateLimit-Policy` and `RateLimit` fields of the limit that admitted the request, and
/// `Connection: close` when the connection ends with this answer.
///
/// They go where ``ResponseFields`` says: into a head's `HTTPHeaders`, or straight into the bytes
/// of an HTTP/1.1 head being written (``headBytes(_:for:closing:serializer:)``).
enum ResponseDecoration {
    static func decorate(_ head: inout HTTPResponseHead, for exchange: Exchange, closing: Bool) {
        if exchange.cors != nil { CORSDecision.removeReplaced(from: &head.headers) }
        let addsRequestID = !head.headers.contains(name: "x-request-id")
        let addsClose = closing && !head.headers.contains(name: "connection")
        addFields(to: &head.headers, for: exchange, requestID: addsRequestID, close: addsClose)
    }

    /// The gateway's own fields, added after a head's others: `X-Request-Id` unless `requestID`
    /// is false (the head has one), `Connection: close` if `close`.
    private static func addFields(to fields: inout some ResponseFields, for exchange: Exchange, requestID: Bool, close: Bool) {
        if requestID { fields.add(name: "X-Request-Id", value: exchange.requestID) }
        if let version = exchange.version { fields.add(name: "X-API-Version", value: String(version)) }
        // A field of its own beside any `Vary` of the backend's: recipients combine them (RFC 9110 §5.3).
        if let vary = exchange.vary { fields.add(name: "Vary", value: vary) }
        if let status = exchange.cacheStatus { fields.add(name: "Cache-Status", value: status) }
        exchange.cors?.addFields(to: &fields)
        if let limit = exchange.rateLimit {
            fields.add(name: "RateLimit-Policy", value: limit.policyField)
            fields.add(name: "RateLimit", value: limit.statusField)
        }
        if let trace = exchange.trace {
            // The client learns its trace only if the policy says so; a backend's own trace
            // fields, which name spans the client has no business with, never reach it (``head(_:for:closing:)``
            // left them out).
            if trace.answersTraceparent { fields.add(name: "traceparent", value: trace.fields.traceparent) }
        }
        if close { fields.add(name: "Connection", value: "close") }
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

    /// What ``head(_:for:closing:)`` gives, as the bytes an HTTP/1.1 client gets, written straight
    /// from the backend's field lines: no head is built for them, to be encoded in turn (the
    /// backend's fields copied into new `HTTPHeaders`, the gateway's added there, then all written
    /// out), and each line passed on is copied as it is, its name read in place. The same fields,
    /// in the same order.
    static func headBytes(
        _ upstream: UpstreamResponseHead, for exchange: Exchange, closing: Bool, serializer: inout HTTP1ResponseSerializer
    ) -> ByteBuffer {
        let status = HTTPResponseStatus(statusCode: upstream.status)
        var fields = serializer.beginHead(
            version: exchange.head.version, status: status, answering: exchange.head.method,
            fieldBytes: upstream.fields.bytes.count, fieldCount: 6)
        let listed = ProxyForwarding.connectionListed(upstream.fields)
        let traced = exchange.trace != nil
        let corsReplaces = exchange.cors != nil
        upstream.fields.forEachField { name, _, line in
            guard ProxyForwarding.passesOn(bytes: name, listed: listed, traced: traced) else { return true }
            if corsReplaces && CORSDecision.replacedNames.contains(bytes: name) { return true }
            // Neither framing field passes (hop-by-hop, or the gateway's own): the line goes as it is.
            fields.add(line: line)
            return true
        }
        if let length = upstream.contentLength { fields.addContentLength(length) }
        // The backend's `X-Request-Id` and `Connection` never pass (``ProxyForwarding/replacedOnResponse``, hop-by-hop).
        addFields(to: &fields, for: exchange, requestID: true, close: closing)
        exchange.outcome.status = status.code
        exchange.outcome.responseStarted = true
        return serializer.endHead(&fields)
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

/// Where response fields are added: a head's `HTTPHeaders`, or the bytes of an HTTP/1.1 head being
/// written (``HTTP1ResponseSerializer/HeadFields``).
protocol ResponseFields {
    mutating func add(name: String, value: String)
}

extension HTTPHeaders: ResponseFields {}
