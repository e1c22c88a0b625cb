import Foundation
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoReform
import PorticoUpstream
import Synchronization
import Tracing

/// Why one facade source failed one request; each kind but ``Kind/cancelled`` makes the facade try
/// its next source.
struct SourceFailure: Error {
    enum Kind {
        case unreachable(UpstreamError)
        /// The backend answered with this status (5xx, or a 4xx other than 404).
        case status(Int)
        /// The backend answered 404: the resource does not exist there (not a fallback case).
        case notFound
        /// The body could not be reformed: oversized, malformed, a field missing or of the wrong type.
        case reform(ReformError)
        /// The backend's own rate limit or concurrency cap refused the fetch.
        case refused(Problem)
        /// The request lacks a parameter the source's request template needs.
        case missingParameter(String)
        /// A parameter's value cannot stand as a path segment of the source's request (empty, `.`, `..`).
        case unusableParameter(String)
        /// The request's client went away: not the source's failure, and the end of the request's
        /// fetching (no fallback is tried, nothing is logged or counted against the source).
        case cancelled
    }

    let source: String
    let kind: Kind

    /// The contract field the failure is about, if any.
    var field: String? {
        if case .reform(let error) = kind { return error.field }
        return nil
    }

    var reason: String {
        switch kind {
        case .unreachable(let error): error.kind == .timedOut ? "timed out" : "unreachable"
        case .status(let status): "answered \(status)"
        case .notFound: "answered 404"
        case .reform(let error): error.description
        case .refused(let problem): problem.title.lowercased()
        case .missingParameter(let name): "parameter \(name) missing"
        case .unusableParameter(let name): "parameter \(name) cannot be a path segment"
        case .cancelled: "the client went away"
        }
    }
}

/// Fetches one facade source through the gateway's ``UpstreamClient`` and reforms its body.
///
/// The fetch draws from its backend's rate limit (in the gateway's ``LimitStore``, so the fleet's in
/// fleet mode) and takes one of its concurrency slots, like a proxied request; the slot is given
/// back when the exchange ends, however it ends.
struct SourceFetch: Sendable {
    let upstream: any UpstreamClient
    let limits: any LimitStore
    /// The backends' in-flight counts, for their `maxConcurrent` caps.
    let concurrency: BackendConcurrency
    let service: String
    let requestID: String
    /// Where the request's fetches are registered, so that its client leaving cancels them.
    var tasks: FacadeTasks? = nil
    /// What a `balance: hash` backend hashes: the request's, so that its fetches reach the same
    /// target its proxied requests would. Without them (a shadow's fetch, say) the request id.
    var hashInputs: HashInputs? = nil
    /// Where identical fetches in flight are merged (facades' fetches; a code handler's are its own).
    var coalescer: FetchCoalescer? = nil
    /// The request's trace: each fetch carries it to its backend, and a sampled one records a span
    /// per source and per attempt. (A fetch merged with another request's is that request's.)
    var trace: ExchangeTrace? = nil
    /// The span the attempts' spans go under: a facade source's, or else the server span.
    var parentSpan: (any Span)? = nil

    func fetch(
        _ source: CompiledFacade.Source, contract: Contract, parameters: [String: String], partial: Bool = false,
        on eventLoop: any EventLoop
    ) -> EventLoopFuture<ReformValue> {
        let name = source.name
        guard let backend = source.backend else {
            let error = UpstreamError(.invalidRequest, detail: "backend \(source.policy.backend) is not defined")
            return eventLoop.makeFailedFuture(SourceFailure(source: name, kind: .unreachable(error)))
        }
        let target: String
        switch CompiledFacade.requestTarget(source.policy.request, parameters: parameters) {
        case .success(let value): target = value
        case .failure(let problem):
            let kind: SourceFailure.Kind = problem.isMissing ? .missingParameter(problem.name) : .unusableParameter(problem.name)
            return eventLoop.makeFailedFuture(SourceFailure(source: name, kind: kind))
        }
        let limit = source.reformer.maxBodyBytes
        var fetcher = self
        let span = trace?.child("facade source \(name)", kind: .internal)
        if let span {
            span.attributes["portico.facade.source"] = name
            span.attributes["portico.backend"] = backend.name
            fetcher.parentSpan = span
        }
        let fetched = fetcher.get(
            backend: backend, target: target, accept: Self.accept[source.policy.format] ?? "*/*", limit: limit, on: eventLoop
        )
        .flatMapErrorThrowing { error in
            switch error {
            case let upstreamError as UpstreamError: throw SourceFailure(source: name, kind: .unreachable(upstreamError))
            case let problem as Problem: throw SourceFailure(source: name, kind: .refused(problem))
            case is FetchCancelled: throw SourceFailure(source: name, kind: .cancelled)
            default: throw SourceFailure(source: name, kind: .reform(ReformError(.tooLarge(limit: limit))))
            }
        }.flatMapThrowing { response in
            switch response.status {
            case 200..<300: break
            case 404: throw SourceFailure(source: name, kind: .notFound)
            default: throw SourceFailure(source: name, kind: .status(response.status))
            }
            do throws(ReformError) {
                return try source.reformer.reform(response.body, contract: contract, parameters: parameters, partial: partial)
            } catch {
                throw SourceFailure(source: name, kind: .reform(error))
            }
        }
        if let span {
            fetched.whenComplete { result in
                if case .failure(let failure as SourceFailure) = result {
                    span.attributes["error.type"] = failure.reason
                    span.setStatus(SpanStatus(code: .error, message: failure.reason))
                }
                span.end()
            }
        }
        return fetched
    }

    /// One `GET` of `target` from `backend`, its body collected whole up to `limit`. Fails with
    /// the ``UpstreamError``, the limit's ``Problem`` (429 or 503), ``BodyTooLarge``, or
    /// ``FetchCancelled`` once the request's client has gone away (then before drawing from the
    /// backend's limits or sending anything).
    func get(
        backend: CompiledBackend, target: String, accept: String, limit: Int, on eventLoop: any EventLoop
    ) -> EventLoopFuture<FetchedResponse> {
        if let tasks, tasks.isCancelled { return eventLoop.makeFailedFuture(FetchCancelled()) }
        guard let coalescer else { return fetch(backend: backend, target: target, accept: accept, limit: limit, on: eventLoop) }
        let key = FetchCoalescer.Key(backend: ObjectIdentifier(backend), target: target, accept: accept)
        switch coalescer.join(key, on: eventLoop) {
        case .leader(let promise):
            let fetched = fetch(backend: backend, target: target, accept: accept, limit: limit, on: eventLoop)
            fetched.whenComplete { _ in coalescer.finish(key) }
            fetched.cascade(to: promise)
            return fetched
        case .follower(let running):
            let tasks = tasks
            return running.hop(to: eventLoop).flatMapError { error in
                // The fetch waited on was its own client's to cancel, not an answer: fetch anew.
                guard error is FetchCancelled else { return eventLoop.makeFailedFuture(error) }
                if let tasks, tasks.isCancelled { return eventLoop.makeFailedFuture(FetchCancelled()) }
                return fetch(backend: backend, target: target, accept: accept, limit: limit, on: eventLoop)
            }.flatMapThrowing { response in
                // The leader's limit may have been larger than this source's.
                guard response.body.count <= limit else { throw BodyTooLarge() }
                return response
            }
        }
    }

    /// ``get(backend:target:accept:limit:on:)`` without merging.
    private func fetch(
        backend: CompiledBackend, target: String, accept: String, limit: Int, on eventLoop: any EventLoop
    ) -> EventLoopFuture<FetchedResponse> {
        let request = LimitRequest(service: service, backend: RateLimiter.draw(backend: backend))
        switch limits.admit(request, on: eventLoop, span: trace?.redisSpan(under: parentSpan)) {
        case .decided(.refused(let refusal)):
            return eventLoop.makeFailedFuture(refusal)
        case .decided(.admitted):
            return send(backend: backend, target: target, accept: accept, limit: limit, on: eventLoop)
        case .pending(let future):
            let tasks = tasks
            return future.flatMap { outcome in
                if case .refused(let refusal) = outcome { return eventLoop.makeFailedFuture(refusal) }
                // The client may have gone while the store answered.
                if let tasks, tasks.isCancelled { return eventLoop.makeFailedFuture(FetchCancelled()) }
                return send(backend: backend, target: target, accept: accept, limit: limit, on: eventLoop)
            }
        }
    }

    /// The fetch itself, once the backend's limit admitted it: its concurrency slot, then the exchange.
    /// The fetch itself, once the backend's limit admitted it: a target of the backend, its
    /// concurrency slot, then the exchange, retried on another target as the backend's `retries`
    /// allow (a fetch is a `GET`: idempotent). A backend whose every target is down fails at once
    /// with its 503, which a facade takes as the source failing.
    private func send(
        backend: CompiledBackend, target path: String, accept: String, limit: Int, on eventLoop: any EventLoop
    ) -> EventLoopFuture<FetchedResponse> {
        let hashKey = hashInputs?.key(for: backend) ?? requestID[...]
        let target: CompiledTarget
        switch backend.pick(hashKey: hashKey.utf8) {
        case .success(let chosen): target = chosen
        case .failure(let unavailable): return eventLoop.makeFailedFuture(backend.problem(unavailable))
        }
        let heldSlot: BackendConcurrency.Counter?
        switch concurrency.slot(for: backend) {
        case .success(let slot): heldSlot = slot
        case .failure(let busy):
            backend.release(target)
            return eventLoop.makeFailedFuture(busy)
        }
        backend.retryState.requests.wrappingAdd(1, ordering: .relaxed)
        let fetched = attempt(
            backend: backend, at: target, hashKey: hashKey, tried: TargetSet(), number: 1, path: path, accept: accept, limit: limit,
            deadline: .now() + .nanoseconds(backend.timeout.nanoseconds), on: eventLoop)
        // The slot is the backend's while the exchange lasts, however it ends.
        fetched.whenComplete { _ in
            heldSlot?.release()
            backend.retryState.requests.wrappingSubtract(1, ordering: .relaxed)
        }
        return fetched
    }

    /// One attempt at `target`; on a failure the backend's `retries` list, another at a target not
    /// tried yet (within the retry budget and the backend's `timeout`).
    private func attempt(
        backend: CompiledBackend, at target: CompiledTarget, hashKey: Substring, tried: TargetSet, number: Int, path: String,
        accept: String, limit: Int, deadline: NIODeadline, on eventLoop: any EventLoop
    ) -> EventLoopFuture<FetchedResponse> {
        var triedSoFar = tried
        triedSoFar.insert(target.index)
        let tried = triedSoFar
        var headers = FieldLines(capacity: 128)
        headers.add(name: "host", value: target.hostHeader)
        headers.add(name: "accept", value: accept)
        headers.add(name: "x-request-id", value: requestID)
        var request = UpstreamRequest(
            method: "GET", url: target.urlPrefix + path, headers: headers, connectTimeout: backend.connectTimeout,
            timeout: backend.attemptTimeout(until: deadline))
        request.client = backend.client
        request.trustedCAFile = backend.trustedCAFile
        let span = trace?.attemptSpan(method: "GET", url: request.url, backend: backend.name, attempt: number, under: parentSpan)
        if let trace { trace.fields(naming: span).write(to: &request.headers, replacing: false) }
        let collector = BodyCollector(limit: limit, promise: eventLoop.makePromise())
        let task = upstream.execute(request, eventLoop: eventLoop, handler: collector)
        collector.task = task
        collector.taskStarted()
        let bound = NIOLoopBound(collector, eventLoop: eventLoop)
        let registered = tasks?.started {
            eventLoop.execute { bound.value.cancel() }
        }
        let tasks = tasks
        let fetched = collector.promise.futureResult
        fetched.whenComplete { result in
            switch result {
            case .success(let response): span?.endAttempt(status: response.status, failure: nil)
            case .failure(let error): span?.endAttempt(status: 0, failure: "\(error)")
            }
            backend.release(target)
            if let registered { tasks?.finished(registered) }
            switch result {
            case .success(let response):
                backend.attemptEnded(at: target, failed: response.status >= 500)
            case .failure(let error as UpstreamError) where ProxyAttempts.condition(error) != nil:
                backend.attemptEnded(at: target, failed: true)
            case .failure:
                break  // cancelled (its client left), over its size, or shut down: nothing of the target
            }
        }
        return fetched.flatMap { response -> EventLoopFuture<FetchedResponse> in
            guard let condition = ProxyAttempts.condition(status: response.status),
                let next = retryTarget(backend, condition: condition, hashKey: hashKey, tried: tried, number: number, deadline: deadline)
            else { return eventLoop.makeSucceededFuture(response) }
            return retry(
                backend, at: next, hashKey: hashKey, tried: tried, number: number, path: path, accept: accept, limit: limit,
                deadline: deadline, on: eventLoop)
        }.flatMapError { error -> EventLoopFuture<FetchedResponse> in
            guard let upstreamError = error as? UpstreamError, let condition = ProxyAttempts.condition(upstreamError),
                let next = retryTarget(backend, condition: condition, hashKey: hashKey, tried: tried, number: number, deadline: deadline)
            else { return eventLoop.makeFailedFuture(error) }
            return retry(
                backend, at: next, hashKey: hashKey, tried: tried, number: number, path: path, accept: accept, limit: limit,
                deadline: deadline, on: eventLoop)
        }
    }

    private func retryTarget(
        _ backend: CompiledBackend, condition: RetryCondition, hashKey: Substring, tried: TargetSet, number: Int, deadline: NIODeadline
    ) -> CompiledTarget? {
        if let tasks, tasks.isCancelled { return nil }
        return backend.retryTarget(
            after: condition, method: "GET", idempotencyKey: false, attempt: number, tried: tried, hashKey: hashKey.utf8,
            deadline: deadline)
    }

    private func retry(
        _ backend: CompiledBackend, at next: CompiledTarget, hashKey: Substring, tried: TargetSet, number: Int, path: String,
        accept: String, limit: Int, deadline: NIODeadline, on eventLoop: any EventLoop
    ) -> EventLoopFuture<FetchedResponse> {
        let retried = attempt(
            backend: backend, at: next, hashKey: hashKey, tried: tried, number: number + 1, path: path, accept: accept, limit: limit,
            deadline: deadline, on: eventLoop)
        retried.whenComplete { _ in backend.retryState.retries.wrappingSubtract(1, ordering: .relaxed) }
        return retried
    }

    static let accept: [SourceFormat: String] = [
        .json: "application/json", .xml: "application/xml, text/xml", .csv: "text/csv, text/plain",
    ]
}

/// A backend's whole answer to a facade's (or a code handler's) fetch.
public struct FetchedResponse: Sendable {
    public let status: Int
    public let body: Data
    /// The response's fields, as the backend's head kept them (a facade reads none of them).
    public var fields = FieldLines()
    /// The response's fields as pairs (a JWK Set's `Cache-Control` says how long its keys may be
    /// used): made from ``fields`` when asked for.
    public var headers: HTTPHeaders {
        get { fields.httpHeaders }
        set { fields = FieldLines(newValue) }
    }
}

/// A backend's body was longer than the fetch allowed; the exchange was cancelled there.
public struct BodyTooLarge: Error {}

/// The request's client went away: its fetch was cancelled, or never started.
public struct FetchCancelled: Error {}

/// Gathers one source's response whole, up to a limit: a body over it cancels the exchange at
/// once, so an oversized answer costs at most the limit in memory. (Also what fetches an issuer's
/// JWK Set.)
final class BodyCollector: UpstreamResponseHandler {
    typealias Response = FetchedResponse
    typealias TooLarge = BodyTooLarge

    let limit: Int
    let promise: EventLoopPromise<Response>
    var task: (any UpstreamTask)?
    private var status = 0
    private var fields = FieldLines()
    private var body = Data()
    private var done = false
    /// Credit owed to the task for bytes delivered before `execute` returned it.
    private var owed = 0

    init(limit: Int, promise: EventLoopPromise<Response>) {
        self.limit = limit
        self.promise = promise
    }

    func taskStarted() {
        guard owed > 0, !done else { return }
        task?.consumed(bytes: owed)
        owed = 0
    }

    /// The request's client went away: the exchange is abandoned, and its future fails (the
    /// upstream client may deliver nothing more once cancelled).
    func cancel() {
        guard !done else { return }
        task?.cancel()
        finish(.failure(FetchCancelled()))
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        guard !done else { return }
        if let head = events.head {
            status = head.status
            fields = head.fields
            if let length = head.contentLength, length > limit { return finish(.failure(TooLarge())) }
        }
        if let part = events.body {
            guard body.count + part.readableBytes <= limit else { return finish(.failure(TooLarge())) }
            body.append(contentsOf: part.readableBytesView)
            if events.result == nil {
                if let task { task.consumed(bytes: part.readableBytes) } else { owed += part.readableBytes }
            }
        }
        switch events.result {
        case .success: finish(.success(Response(status: status, body: body, fields: fields)))
        case .failure(let error): finish(.failure(error))
        case nil: break
        }
    }

    private func finish(_ result: Result<Response, any Error>) {
        done = true
        if case .failure(let error) = result, error is TooLarge { task?.cancel() }
        task = nil
        promise.completeWith(result)
    }
}
