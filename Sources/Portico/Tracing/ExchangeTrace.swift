import NIOHTTP1
import OTel
import PorticoPolicy
import Tracing

/// One request's trace: its server span, whether the trace is sampled, and the trace-context
/// fields its backend requests carry.
///
/// Only a sampled request gets more spans (stages, backend attempts, facade sources); an unsampled
/// one costs its server span's ids (swift-otel makes no recording span for it) and still carries
/// its trace to every backend, so a backend that samples on its own joins the same trace.
/// Confined to the connection's event loop, like the exchange that holds it; its tracer is held
/// weakly (``TracerRegistry`` says why) and, once the gateway has stopped, is gone: then no more
/// spans are made.
final class ExchangeTrace: @unchecked Sendable {
    /// The tracer, for a sampled request only (an unsampled one makes no spans, and a weak
    /// reference costs atomic operations).
    private let owner: WeakGatewayTracer?
    /// The server span, for a sampled request; nil for an unsampled one.
    let server: (any Span)?
    var sampled: Bool { server != nil }
    /// The fields naming the server span: what a backend request carries when no client span of
    /// its own stands between (an unsampled request's).
    let fields: TraceFields
    /// Whether the client's answer carries `traceparent` (`tracing.responseTraceparent`).
    let answersTraceparent: Bool
    /// The span of the stage whose `process` is running (sampled requests only), set by the stage
    /// run: the parent of what a stage calls out to (a Redis round trip).
    var stage: (any Span)?

    /// Starts `head`'s trace, continuing the client's if the policy trusts it (`tracing.trustIncoming`)
    /// and starting a new one otherwise; a sampled request gets its server span.
    init(_ tracing: GatewayTracer, head: HTTPRequestHead, client: ClientConnection) {
        answersTraceparent = tracing.answersTraceparent
        var parent: TraceParent?
        if Self.trusts(tracing.trust, client), let text = head.headers.first(name: "traceparent") {
            parent = TraceParent(text)
        }
        let traceID = parent?.traceID ?? (TraceIDs.next(), TraceIDs.next())
        guard tracing.sampler.samples(traceID: traceID, parent: parent) else {
            owner = nil
            server = nil
            let tracestate = parent == nil ? nil : head.headers.first(name: "tracestate")
            fields = TraceFields(
                traceparent: TraceParent(traceID: traceID, spanID: TraceIDs.next(), sampled: false).header, tracestate: tracestate)
            return
        }
        owner = WeakGatewayTracer(value: tracing)
        let tracer = tracing.tracer
        var context = ServiceContext.topLevel
        if parent != nil { tracer.extract(head.headers, into: &context, using: RequestFieldExtractor()) }
        let span = tracer.startSpan(head.method.rawValue, context: context, ofKind: .server)
        server = span
        var fields = TraceFields()
        tracer.inject(span.context, into: &fields, using: TraceFieldsInjector())
        self.fields = fields
        Self.describe(span, head: head, client: client)
    }

    static func trusts(_ trust: borrowing TracingPolicy.TrustIncoming, _ client: ClientConnection) -> Bool {
        if trust.everyone { return true }
        if let listener = client.listener, trust.listeners.contains(listener) { return true }
        guard !trust.networks.isEmpty, let address = client.addressBytes else { return false }
        return trust.networks.contains { $0.contains(address) }
    }

    /// The server span's attributes known at the head (OpenTelemetry's HTTP server conventions).
    /// The query is never recorded (it may carry a key or a token), nor any credential field.
    private static func describe(_ span: any Span, head: HTTPRequestHead, client: ClientConnection) {
        var attributes = span.attributes
        attributes["http.request.method"] = head.method.rawValue
        let path = head.uri.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(head.uri[..<$0]) } ?? head.uri
        attributes["url.path"] = path
        attributes["url.scheme"] = client.tls == nil ? "http" : "https"
        attributes["network.protocol.version"] = head.version.major == 2 ? "2" : "\(head.version.major).\(head.version.minor)"
        if let host = head.headers.first(name: "host") {
            let (name, port) = Self.split(host: host)
            attributes["server.address"] = name
            if let port { attributes["server.port"] = port }
        }
        if let address = client.address { attributes["client.address"] = address }
        if let agent = head.headers.first(name: "user-agent") { attributes["user_agent.original"] = agent }
        span.attributes = attributes
    }

    /// `host[:port]`, `[v6]:port`.
    static func split(host: String) -> (name: String, port: Int?) {
        if let colon = host.lastIndex(of: ":"), !host[colon...].contains("]"), let port = Int(host[host.index(after: colon)...]) {
            return (String(host[..<colon]), port)
        }
        return (host, nil)
    }

    /// A span under `parent` (the server span by default), for a sampled request; nil for an
    /// unsampled one.
    func child(_ name: String, kind: SpanKind, under parent: (any Span)? = nil) -> (any Span)? {
        guard let server, let tracer = owner?.value?.tracer else { return nil }
        return tracer.startSpan(name, context: (parent ?? server).context, ofKind: kind)
    }

    /// A client span for a round trip to the fleet's Redis, under `parent` (the running stage's
    /// span by default); nil for an unsampled request. ``FleetStore`` describes and ends it.
    func redisSpan(under parent: (any Span)? = nil) -> (any Span)? {
        child("EVALSHA", kind: .client, under: parent ?? stage)
    }

    /// A client span for one attempt at a backend (OpenTelemetry's HTTP client conventions), named
    /// by its method; nil for an unsampled request. `url` is recorded without its query.
    func attemptSpan(method: String, url: String, backend: String, attempt: Int, under parent: (any Span)? = nil) -> (any Span)? {
        guard let span = child(method, kind: .client, under: parent) else { return nil }
        var attributes = span.attributes
        attributes["http.request.method"] = method
        let withoutQuery = url.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(url[..<$0]) } ?? url
        attributes["url.full"] = withoutQuery
        if let authority = withoutQuery.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false).dropFirst(2).first {
            let (name, port) = Self.split(host: String(authority))
            attributes["server.address"] = name
            attributes["server.port"] = port ?? (url.hasPrefix("https:") ? 443 : 80)
        }
        attributes["portico.backend"] = backend
        if attempt > 1 { attributes["http.request.resend_count"] = attempt - 1 }
        span.attributes = attributes
        return span
    }

    /// The trace-context fields naming `span`, or the server span when there is none.
    func fields(naming span: (any Span)?) -> TraceFields {
        guard let span, let tracer = owner?.value?.tracer else { return fields }
        var fields = TraceFields()
        tracer.inject(span.context, into: &fields, using: TraceFieldsInjector())
        return fields
    }

    /// Ends the server span with what the exchange came to.
    func end(_ exchange: Exchange) {
        guard let server else { return }
        var attributes = server.attributes
        attributes["http.response.status_code"] = Int(exchange.outcome.status)
        attributes["portico.request_id"] = exchange.requestID
        if let routed = exchange.routed {
            let route = routed.service.policy.path
            attributes["http.route"] = route
            attributes["portico.service"] = routed.service.name
            server.operationName = "\(exchange.head.method.rawValue) \(route)"
        }
        if let version = exchange.version { attributes["portico.api_version"] = version }
        if let keyID = exchange.keyID { attributes["portico.key_id"] = keyID }
        if let problem = exchange.outcome.problemType { attributes["portico.problem.type"] = problem }
        if exchange.outcome.status >= 500 || exchange.outcome.status == 499 {
            attributes["error.type"] = exchange.outcome.status == 499 ? "client_closed" : "\(exchange.outcome.status)"
            server.setStatus(SpanStatus(code: .error))
        }
        server.attributes = attributes
        server.end()
    }
}

extension Span {
    /// Ends an attempt's span: the status the backend answered (0: none), or why there was none.
    func endAttempt(status: Int, failure: String?) {
        if status > 0 { attributes["http.response.status_code"] = status }
        if let failure {
            attributes["error.type"] = failure
            setStatus(SpanStatus(code: .error))
        } else if status >= 500 {
            attributes["error.type"] = "\(status)"
            setStatus(SpanStatus(code: .error))
        }
        end()
    }

    /// Records a problem the gateway answered with: its type, and an error status for a 5xx.
    func record(_ problem: Problem) {
        attributes["portico.problem.type"] = problem.type
        if problem.status.code >= 500 { setStatus(SpanStatus(code: .error, message: problem.title)) }
    }
}
