import Logging
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream
import Synchronization
import Tracing

/// One proxied exchange's attempts: the first at the target the balancer chose, then, when the
/// backend's `retries` allow it, each further one at a target not tried yet, until an answer
/// begins. Whatever reaches the client comes from one attempt only: an attempt is given up (and
/// retried) only before its response head has been passed on.
///
/// A request is retried only when a second attempt cannot apply it twice (``RetryPolicy``): the
/// first attempt never reached the backend (a connect failure), or its method is idempotent (or it
/// carries an `Idempotency-Key`) and the failure is one the policy lists. Retries in flight stay
/// within the backend's budget. Every attempt's outcome counts toward its target's ejection.
///
/// It is the exchange's task: cancelling it (the client went away) cancels the current attempt.
/// Confined to the connection's event loop (`@unchecked Sendable` for ``UpstreamTask``, whose
/// calls the connection's handler makes there). Each attempt delivers through its own small
/// handler, tagged with its number, so that a late event of an attempt given up is dropped.
final class ProxyAttempts: UpstreamTask, UpstreamResponseHandler, @unchecked Sendable {
    private let exchange: Exchange
    private let responder: any ExchangeResponder
    private let backend: CompiledBackend
    private let upstream: any UpstreamClient
    private let eventLoop: any EventLoop
    private let logger: Logger
    /// The request as the next attempt sends it, kept only for a backend with retries (a retry
    /// sends it again, changed). Without retries the one attempt is handed the request and nothing
    /// here keeps it: a stored request is copied to be passed on, a retain and a release of each of
    /// its fields.
    private var request: UpstreamRequest?
    private var target: CompiledTarget
    /// What `balance: hash` hashed for the first attempt; a retry probes on from the same slot.
    private let hashKey: Substring
    private var tried = TargetSet()
    private var attempt = 0
    /// The current attempt holds its target's in-flight count.
    private var attemptOpen = false
    /// The current attempt holds a slot of the retry budget.
    private var holdsRetry = false
    /// The response head has been passed on: no more retries.
    private var answering = false
    /// The status of the response passed on (a 5xx counts against its target).
    private var status = 0
    private let deadline: NIODeadline
    /// The current attempt's task.
    private var current: (any UpstreamTask)?
    /// The exchange has ended (answered, failed or cancelled): counted out of the backend's requests.
    private var finished = false
    /// The current attempt's client span, for a sampled request.
    private var span: (any Span)?
    /// The status the current attempt's backend answered (0 until it has).
    private var attemptStatus = 0

    init(
        exchange: Exchange, responder: any ExchangeResponder, backend: CompiledBackend, target: CompiledTarget, hashKey: Substring,
        upstream: any UpstreamClient, eventLoop: any EventLoop, logger: Logger
    ) {
        self.hashKey = hashKey
        self.exchange = exchange
        self.responder = responder
        self.backend = backend
        self.target = target
        self.upstream = upstream
        self.eventLoop = eventLoop
        self.logger = logger
        // Only retries read it: one clock read fewer per request without them.
        self.deadline = backend.retries == nil ? .distantFuture : .now() + .nanoseconds(backend.timeout.nanoseconds)
    }

    /// Sends the first attempt of `request`.
    func start(_ request: consuming UpstreamRequest) {
        // Counted for every backend: the retry budget's base, and the console's in-flight figure.
        backend.retryState.requests.wrappingAdd(1, ordering: .relaxed)
        if backend.retries != nil { self.request = copy request }
        send(request)
    }

    /// Sends an attempt of `request`: its own copy when it is a retry's (the stored request is
    /// not held across the call, see below), the one request otherwise.
    private func send(_ request: consuming UpstreamRequest) {
        var request = request
        attempt += 1
        tried.insert(target.index)
        attemptOpen = true
        exchange.outcome.attempts = attempt
        exchange.outcome.target = backend.targets.count > 1 ? target.origin : nil
        attemptStatus = 0
        if let trace = exchange.trace {
            // Each attempt names its own span as the backend's parent (the server span's, unsampled).
            span = trace.attemptSpan(method: request.method, url: request.url, backend: backend.name, attempt: attempt)
            trace.fields(naming: span).write(to: &request.headers, replacing: attempt > 1)
        }
        // Without retries there is one attempt, never given up: it delivers here directly.
        let handler: any UpstreamResponseHandler = backend.retries == nil ? self : AttemptDelivery(attempts: self, attempt: attempt)
        // A local value, not the stored request borrowed: a client may call the handler back
        // inside `execute` (the HTTP/2 client dispatches at once), and a retry changes the stored
        // request, which an exclusive access held across the call would turn into a crash.
        current = upstream.execute(request, eventLoop: eventLoop, handler: handler)
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        received(events, attempt: 1)
    }

    /// The client went away (or the answer broke): the current attempt stops, and no event of it
    /// that was already on its way starts anything (``received(_:attempt:)`` checks `finished`).
    /// Its target is not told: a client leaving says nothing of it.
    func cancel() {
        current?.cancel()
        current = nil
        endAttempt(.givenUp)
        finish()
    }

    func consumed(bytes: Int) {
        current?.consumed(bytes: bytes)
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        backend.retryState.requests.wrappingSubtract(1, ordering: .relaxed)
    }

    fileprivate func received(_ events: UpstreamEvents, attempt number: Int) {
        guard number == attempt, !finished else { return }
        if let head = events.head { attemptStatus = head.status }
        if !answering {
            if let head = events.head {
                if let condition = Self.condition(status: head.status), let next = retryTarget(for: condition) {
                    return retry(next.request, at: next.target, after: "answered \(head.status)")
                }
                answering = true
                status = head.status
            } else if case .failure(let error) = events.result {
                if let condition = Self.condition(error), let next = retryTarget(for: condition) {
                    return retry(next.request, at: next.target, after: error.description)
                }
            }
        }
        if let result = events.result {
            switch result {
            case .success: endAttempt(status >= 500 ? .failed : .succeeded)
            case .failure(let error): endAttempt(Self.condition(error) == nil ? .givenUp : .failed, failure: error.description)
            }
            current = nil
            finish()
        }
        responder.handlerReceived(events, for: exchange)
    }

    /// The target a failed attempt is retried at, with the request to send there, if the request
    /// may be retried for `condition`. A backend without retries keeps no request, and retries
    /// nothing.
    private func retryTarget(for condition: RetryCondition) -> (target: CompiledTarget, request: UpstreamRequest)? {
        guard let request,
            let next = backend.retryTarget(
                after: condition, method: request.method, idempotencyKey: request.headers.contains(name: "idempotency-key"),
                attempt: attempt, tried: tried, hashKey: hashKey.utf8, deadline: deadline)
        else { return nil }
        return (next, request)
    }

    private func retry(_ request: consuming UpstreamRequest, at next: CompiledTarget, after failure: String) {
        var request = request
        current?.cancel()
        endAttempt(.failed, failure: attemptStatus > 0 ? nil : failure)
        holdsRetry = true
        logger.notice(
            "retrying on another target",
            metadata: [
                "request_id": .string(exchange.requestID), "backend": .string(backend.name), "attempt": .stringConvertible(attempt),
                "target": .string(target.origin), "failure": .string(failure), "next": .string(next.origin),
            ])
        let old = target.urlPrefix
        request.url = next.urlPrefix + request.url.dropFirst(old.count)
        request.headers.replaceOrAdd(name: "Host", value: next.hostHeader)
        request.timeout = backend.attemptTimeout(until: deadline)
        self.request = request
        target = next
        send(request)
    }

    private enum AttemptEnd {
        case succeeded
        /// A connect failure, reset, timeout or 5xx: counts toward the target's ejection.
        case failed
        /// Stopped for reasons of the gateway's or the client's, which say nothing of the target.
        case givenUp
    }

    private func endAttempt(_ end: AttemptEnd, failure: String? = nil) {
        guard attemptOpen else { return }
        attemptOpen = false
        if let span {
            span.endAttempt(status: attemptStatus, failure: failure ?? (end == .givenUp && attemptStatus == 0 ? "cancelled" : nil))
            self.span = nil
        }
        backend.release(target)
        if end != .givenUp { backend.attemptEnded(at: target, failed: end == .failed) }
        if holdsRetry {
            holdsRetry = false
            backend.retryState.retries.wrappingSubtract(1, ordering: .relaxed)
        }
    }

    /// The retry condition of a failed attempt's error.
    static func condition(_ error: UpstreamError) -> RetryCondition? {
        switch error.kind {
        case .connectFailed: .connectFailure
        case .badResponse: .reset
        case .timedOut: .timeout
        case .shutdown, .invalidRequest: nil
        }
    }

    static func condition(status: Int) -> RetryCondition? {
        switch status {
        case 502: .status502
        case 503: .status503
        case 504: .status504
        default: nil
        }
    }
}

/// Routes one attempt's events to its ``ProxyAttempts``, tagged with the attempt's number.
private final class AttemptDelivery: UpstreamResponseHandler {
    private let attempts: ProxyAttempts
    private let attempt: Int

    init(attempts: ProxyAttempts, attempt: Int) {
        self.attempts = attempts
        self.attempt = attempt
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        attempts.received(events, attempt: attempt)
    }
}
