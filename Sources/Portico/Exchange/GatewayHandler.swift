import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoTLS
import PorticoUpstream

/// What every connection's handler shares: the policy, the upstream client, the access log.
struct GatewayServices: Sendable {
    let store: PolicyStore
    let upstream: any UpstreamClient
    /// Nonces of accepted signatures; outlives policy reloads.
    let nonces: any NonceStore
    /// Rate-limit buckets and backend concurrency; outlive policy reloads.
    let rateLimiter: RateLimiter
    let accessLogger: Logger
    let scheme: String
    /// The listener's policy name: which public base URL the service locator publishes to its clients.
    var listener: String = ""
    /// The access log's dedicated writer; without one, lines go to `accessLogger`.
    var accessLogWriter: AccessLogWriter? = nil
    /// Where TLS handshakes and error answers are counted (requests count into their policy's).
    var metrics: GatewayMetrics? = nil
    /// Where facades log failed sources and shadow mismatches.
    var logger = Logger(label: "portico")
    /// Handlers written in Swift, by name.
    var codeHandlers: [String: any CodeHandler] = [:]
    /// Where requests draw from their limits and record their nonces: this process's
    /// (`rateLimiter` and `nonces`), or, in fleet mode, the fleet's in Redis.
    let limits: any LimitStore

    /// - Parameter fleet: fleet mode's shared state, which then holds limits and nonces, with
    ///   `rateLimiter` and `nonces` as its fallback when Redis cannot answer.
    init(
        store: PolicyStore, upstream: any UpstreamClient, nonces: any NonceStore, rateLimiter: RateLimiter, accessLogger: Logger,
        scheme: String, listener: String = "", accessLogWriter: AccessLogWriter? = nil, metrics: GatewayMetrics? = nil,
        logger: Logger = Logger(label: "portico"), codeHandlers: [String: any CodeHandler] = [:], fleet: FleetStore? = nil
    ) {
        self.store = store
        self.upstream = upstream
        self.nonces = nonces
        self.rateLimiter = rateLimiter
        self.accessLogger = accessLogger
        self.scheme = scheme
        self.listener = listener
        self.accessLogWriter = accessLogWriter
        self.metrics = metrics
        self.logger = logger
        self.codeHandlers = codeHandlers
        let local = LocalLimitStore(rateLimiter: rateLimiter, nonces: nonces)
        self.limits = fleet.map { FleetLimitStore(fleet: $0, local: local) } ?? local
    }
}

/// Carries each request of one connection through the stages and its response back to the client.
///
/// It decides nothing itself: the ``ExchangeStateMachine`` says what each event means, the stages
/// (``RequestStages``) say whether a request may go on, and this handler performs what they return
/// on the channel. One per connection, confined to its event loop, right above NIO's HTTP/1.1
/// codec: it also keeps pipelined requests in order (``PipelinedRequests``), answers what the
/// decoder refuses (``Problem/parserError(_:maxHeadBytes:maxHeaderCount:)``) and lets a shutting-down
/// gateway's connections finish their last exchange, work that would otherwise take two more
/// handlers on every event.
///
/// Writes made while a read batch is being processed (early answers to pipelined requests, a
/// `100 Continue`) are flushed once, at `channelReadComplete`; writes prompted by a backend are
/// flushed once per delivery.
final class GatewayHandler: ChannelDuplexHandler, ExchangeResponder {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let services: GatewayServices
    private let stages: RequestStages
    private let proxy: ProxyHandler
    private let facade: FacadeHandler
    private let accessLog: AccessLogObserver
    /// The same connection's timeout handler, told where each request stands.
    private let timeouts: ConnectionTimeoutHandler
    private var machine = ExchangeStateMachine()
    /// The policy as this connection last read it (one atomic load per request; see ``PolicyStore``).
    private var policy: PolicyStore.Reader
    private var pipelined = PipelinedRequests()
    /// A read was asked for while pipelined parts waited; it is passed on once they are taken.
    private var readHeld = false
    private var delivering = false
    /// The end of an answer given before its request ended, while the rest of the request is
    /// dropped: a close decided meanwhile (the rest is too long, or malformed) waits for it.
    private var earlyAnswerWritten: EventLoopFuture<Void>?
    private var client = ClientConnection()
    private var context: ChannelHandlerContext?
    /// Inside `channelRead`…`channelReadComplete`: writes wait for the batch's one flush.
    private var readingBatch = false
    private var flushPending = false
    /// Body bytes delivered by the upstream client and written, but not yet returned to it as
    /// credit because the channel was not writable; returned when it becomes writable.
    private var unconsumedBytes = 0

    init(services: GatewayServices, timeouts: ConnectionTimeoutHandler, stages: RequestStages) {
        self.services = services
        self.policy = PolicyStore.Reader(services.store)
        self.stages = stages
        self.proxy = ProxyHandler(upstream: services.upstream, concurrency: services.rateLimiter.concurrency, scheme: services.scheme)
        self.facade = FacadeHandler(
            upstream: services.upstream, limits: services.limits, concurrency: services.rateLimiter.concurrency,
            metrics: services.metrics, logger: services.logger)
        self.accessLog = AccessLogObserver(logger: services.accessLogger, writer: services.accessLogWriter)
        self.timeouts = timeouts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        client.address = context.channel.remoteAddress?.ipAddress
        client.addressSubject = ClientAddress.rateLimitSubject(context.channel.remoteAddress)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Inbound

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let completed as TLSHandshakeCompleted:
            client.tls = completed.info
            client.certificate = completed.certificate
            services.metrics?.tlsHandshakeCompleted()
        case is ChannelShouldQuiesceEvent:
            pipelined.removeAll()
            perform(machine.quiesce(), context: context)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        readingBatch = true
        let part = unwrapInboundIn(data)
        guard pipelined.isEmpty && machine.accepts(part) else {
            return pipelined.append(.part(part))
        }
        receive(part, context: context)
    }

    private func receive(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            let requestID = head.headers.first(name: "x-request-id").flatMap { RequestID.accept($0) ? $0 : nil } ?? RequestID.generate()
            let exchange = Exchange(head: head, requestID: requestID, policy: policy.current(), client: client)
            perform(machine.headReceived(exchange), context: context)
        case .body(let part):
            perform(machine.bodyReceived(part), context: context)
        case .end:
            perform(machine.endReceived(), context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readingBatch = false
        if flushPending {
            flushPending = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { returnCredit() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // A TLS connection that closes before its handshake completed: refused, failed or abandoned.
        if client.tls == nil && services.scheme == "https" { services.metrics?.tlsHandshakeFailed() }
        pipelined.removeAll()
        readHeld = false
        perform(machine.channelInactive(), context: context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Bytes after a parse error: that error is answered, or queued behind the response under
        // way, and the connection closes then; these must not cut that response short.
        if let decoderError = error as? ByteToMessageDecoderError, case .dataReceivedInErrorState = decoderError { return }
        guard let parserError = error as? HTTPParserError else {
            return close(context: context)
        }
        guard pipelined.isEmpty && machine.acceptsParserError else {
            return pipelined.append(.parserError(parserError))
        }
        refuse(parserError, context: context)
    }

    private func refuse(_ error: HTTPParserError, context: ChannelHandlerContext) {
        let limits = policy.current().snapshot.limits
        let problem = Problem.parserError(error, maxHeadBytes: limits.maxHeadBytes, maxHeaderCount: limits.maxHeaderCount)
        perform(machine.parserErrorReceived(problem), context: context)
    }

    // MARK: Pipelining

    /// Holds a read back while pipelined parts wait (see ``PipelinedRequests``).
    func read(context: ChannelHandlerContext) {
        // A connection that is closing reads nothing more.
        if case .closed = machine.state { return }
        if pipelined.isEmpty {
            context.read()
        } else {
            readHeld = true
        }
    }

    /// Hands waiting parts to the machine for as long as it takes them; then passes on a held read.
    private func deliverPipelined(context: ChannelHandlerContext) {
        guard !delivering else { return }
        delivering = true
        defer { delivering = false }
        while let event = pipelined.first {
            switch event {
            case .part(let part):
                guard machine.accepts(part) else { return }
                pipelined.removeFirst()
                receive(part, context: context)
            case .parserError(let error):
                guard machine.acceptsParserError else { return }
                pipelined.removeFirst()
                refuse(error, context: context)
            }
        }
        if readHeld {
            readHeld = false
            context.read()
        }
    }

    // MARK: Stages

    /// Runs the stages from `index` on; a suspended one resumes here when its future completes.
    private func runStages(_ exchange: Exchange, from index: Int, context: ChannelHandlerContext) {
        var index = index
        while index < stages.stages.count {
            let outcome = stages.stages[index].process(exchange, on: context.eventLoop)
            index += 1
            switch outcome {
            case .proceed:
                continue
            case .answer(let problem):
                return stagesAnswered(exchange, with: problem, context: context)
            case .suspend(let future):
                return resume(exchange, after: future, at: index, context: context)
            }
        }
        perform(machine.stagesFinished(exchange, answer: nil), context: context)
    }

    private func resume(_ exchange: Exchange, after future: EventLoopFuture<StageOutcome>, at index: Int, context: ChannelHandlerContext) {
        future.hop(to: context.eventLoop).assumeIsolated().whenComplete { result in
            // The client may have left, or the exchange been answered, while the stage waited.
            guard self.machine.isAdmitting(exchange) else { return }
            switch result {
            case .success(.proceed):
                self.runStages(exchange, from: index, context: context)
            case .success(.answer(let problem)):
                self.stagesAnswered(exchange, with: problem, context: context)
            case .success(.suspend(let next)):
                self.resume(exchange, after: next, at: index, context: context)
            case .failure:
                self.stagesAnswered(exchange, with: .stageFailed(), context: context)
            }
        }
    }

    /// A stage refused the request. If it was signed genuinely and its nonce is not recorded yet
    /// (a limit, the version stage or a failed suspension refused it after authentication), the
    /// nonce is recorded now, in the key's share: a refused request can never be admitted later.
    private func stagesAnswered(_ exchange: Exchange, with problem: Problem, context: ChannelHandlerContext) {
        if let nonce = exchange.pendingNonce {
            exchange.pendingNonce = nil
            // Decided as an admitted request's nonce is; the answer is this problem whatever it says.
            _ = services.limits.admit(LimitRequest(service: "", nonce: nonce), on: context.eventLoop)
        }
        perform(machine.stagesFinished(exchange, answer: problem), context: context)
    }

    // MARK: Actions

    private func perform(_ action: ExchangeStateMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .runStages(let exchange):
            timeouts.requestHeadReceived(expectsBody: exchange.expectsBody)
            runStages(exchange, from: 0, context: context)
        case .requestEnded:
            timeouts.requestEndReceived()
        case .sendContinue(let exchange):
            write(.head(HTTPResponseHead(version: exchange.head.version, status: .continue)), context: context)
        case .handle(let exchange):
            timeouts.requestEndReceived()
            handle(exchange, context: context)
        case .answer(let exchange, let problem, let after):
            answer(exchange, with: problem, after: after, context: context)
        case .finishResponse(let exchange, let closing):
            accessLog.exchangeEnded(exchange)
            if !closing { timeouts.responseEndSent() }
            writeEnd(closing: closing, context: context)
        case .abortResponse(let exchange):
            accessLog.exchangeEnded(exchange)
            context.flush()
            context.close(promise: nil)
        case .drainFinished:
            earlyAnswerWritten = nil
            timeouts.requestEndReceived()
            timeouts.responseEndSent()
        case .abandon(let exchange):
            exchange.task?.cancel()
            exchange.task = nil
            exchange.releaseConcurrencySlot()
            exchange.record.failure = "client closed the connection"
            if !exchange.responseStarted { exchange.record.status = 499 }
            accessLog.exchangeEnded(exchange)
        case .close:
            close(context: context)
        case .refuse(let problem, let exchange):
            let requestID = exchange?.requestID ?? RequestID.generate()
            let body = problem.body(requestID: requestID)
            if let exchange {
                exchange.record.status = problem.status.code
                exchange.record.bytesSent = body.readableBytes
                exchange.record.failure = "the request could not be parsed"
                accessLog.exchangeEnded(exchange)
            }
            // Written and flushed at once: the decoder stops here, and the close follows the answer.
            context.write(wrapOutboundOut(.head(problem.head(requestID: requestID, contentLength: body.readableBytes))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            writeEnd(closing: true, context: context)
        }
        if !pipelined.isEmpty || readHeld { deliverPipelined(context: context) }
    }

    /// The request is admitted and whole: its body's digest is checked, then its handler runs.
    private func handle(_ exchange: Exchange, context: ChannelHandlerContext) {
        if let problem = ContentDigestCheck.problem(for: exchange) {
            return perform(machine.handlerAnswered(exchange, problem), context: context)
        }
        if let builtIn = exchange.builtIn {
            exchange.builtIn = nil
            let head = UpstreamResponseHead(
                status: Int(builtIn.status.code), headers: builtIn.headers, contentLength: builtIn.contentLength)
            return handlerReceived(
                UpstreamEvents(head: head, body: builtIn.body, result: .success(UpstreamMetrics(duration: .zero, newConnections: 0))),
                for: exchange)
        }
        switch exchange.handler {
        case .proxy(let policy):
            if let problem = proxy.start(exchange, proxy: policy, on: context.eventLoop, responder: self) {
                perform(machine.handlerAnswered(exchange, problem), context: context)
            }
        case .facade:
            guard let compiled = exchange.facade else {
                return perform(machine.handlerAnswered(exchange, .badGateway(backend: "unknown")), context: context)
            }
            // A facade reads; what another method would mean to its sources is not for it to guess.
            guard exchange.head.method == .GET || exchange.head.method == .HEAD else {
                return perform(machine.handlerAnswered(exchange, .methodNotAllowed(allowed: "GET, HEAD")), context: context)
            }
            let started = NIODeadline.now()
            facade.serve(exchange, facade: compiled, on: context.eventLoop).assumeIsolated().whenComplete { result in
                let answer = (try? result.get()) ?? FacadeAnswer(problem: .stageFailed(), source: compiled.chain.first?.name ?? "")
                exchange.record.source = answer.source
                exchange.record.backend = answer.backend
                exchange.record.upstreamDuration = .nanoseconds((NIODeadline.now() - started).nanoseconds)
                self.handlerFinished(exchange, body: answer.body.map { ($0, "application/json") }, problem: answer.problem)
            }
        case .code(let policy):
            guard let handler = services.codeHandlers[policy.name] else {
                return perform(machine.handlerAnswered(exchange, .codeHandlerMissing(policy.name)), context: context)
            }
            runCode(handler, policy: policy, exchange: exchange, context: context)
        case nil:
            perform(machine.handlerAnswered(exchange, .badGateway(backend: "unknown")), context: context)
        }
    }

    /// Runs a code handler. Its fetches are the exchange's task, as a facade's are: a client that
    /// goes away cancels those in flight and refuses any it asks for later.
    private func runCode(_ handler: any CodeHandler, policy: CodeHandlerPolicy, exchange: Exchange, context: ChannelHandlerContext) {
        let tasks = FacadeTasks()
        exchange.task = tasks
        let fetcher = SourceFetch(
            upstream: services.upstream, limits: services.limits, concurrency: services.rateLimiter.concurrency,
            service: exchange.record.service ?? "", requestID: exchange.requestID, tasks: tasks)
        let handlerContext = CodeHandlerContext(
            eventLoop: context.eventLoop, backends: policy.backends, fetcher: fetcher, compiled: exchange.policy.backends,
            maxBodyBytes: exchange.snapshot.limits.maxBodyBytes)
        let request = CodeHandlerRequest(
            method: exchange.head.method.rawValue, remainder: String(exchange.routed?.remainder ?? ""),
            query: exchange.routed?.query.map(String.init), service: exchange.record.service ?? "", version: exchange.version ?? 0,
            requestID: exchange.requestID, body: exchange.body.map { Data($0.readableBytesView) } ?? Data())
        exchange.body = nil
        handler.respond(to: request, context: handlerContext).hop(to: context.eventLoop).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let response):
                self.handlerFinished(
                    exchange, body: (response.body, response.contentType), problem: nil, status: response.status)
            case .failure(let error):
                let problem = self.codeHandlerProblem(for: error, policy: policy, exchange: exchange, context: handlerContext)
                self.handlerFinished(exchange, body: nil, problem: problem)
            }
        }
    }

    /// How a code handler's failure is answered. A backend's limit refusing a fetch is answered
    /// as is (429 or 503, with its `Retry-After`), as a facade answers it; a backend that could
    /// not be reached, timed out or sent a body over the limit as a proxied request's would be
    /// (502 or 504 naming it), logged as a facade's failed source is. Anything else (the handler's
    /// own error, a refused target or backend) is the gateway's 500, logged as an error.
    private func codeHandlerProblem(
        for error: any Error, policy: CodeHandlerPolicy, exchange: Exchange, context: CodeHandlerContext
    ) -> Problem {
        switch error {
        case let refusal as Problem:
            return refusal
        case is FetchCancelled:
            return .stageFailed()  // the client went away; nobody reads this
        case let upstreamError as UpstreamError:
            // An upstream error no fetch failed with is the handler's own, answered below.
            if let backend = context.failedFetches.backend(for: upstreamError) {
                recordFetchFailure(backend: backend, failure: upstreamError.description, policy: policy, exchange: exchange)
                return ProxyHandler.problem(for: upstreamError, backend: backend)
            }
        case is BodyTooLarge:
            // A body over the limit is the backend's invalid answer, as a facade's source takes it;
            // one no fetch met is the handler's own, answered below.
            if let backend = context.failedFetches.oversizedBackend {
                let failure = "the body is over maxBodyBytes (\(context.maxBodyBytes) bytes)"
                recordFetchFailure(backend: backend, failure: failure, policy: policy, exchange: exchange)
                return .badGateway(backend: backend)
            }
        default:
            break
        }
        services.logger.error(
            "code handler failed",
            metadata: [
                "handler": .string(policy.name), "error": .string(Self.describe(error)), "request_id": .string(exchange.requestID),
            ])
        return .stageFailed()
    }

    /// Records and logs a code handler's fetch that failed at `backend` (at `notice`: the backend's
    /// failure, not the gateway's).
    private func recordFetchFailure(backend: String, failure: String, policy: CodeHandlerPolicy, exchange: Exchange) {
        exchange.record.backend = backend
        exchange.record.failure = failure
        services.logger.notice(
            "code handler fetch failed",
            metadata: [
                "handler": .string(policy.name), "backend": .string(backend), "error": .string(failure),
                "request_id": .string(exchange.requestID),
            ])
    }

    private static func describe(_ error: any Error) -> String {
        (error as? CodeHandlerError)?.message ?? String(describing: error)
    }

    /// A facade's or code handler's whole answer: written as an upstream response would be (so it
    /// is decorated and logged the same way), or answered as a problem.
    private func handlerFinished(_ exchange: Exchange, body: (Data, String)?, problem: Problem?, status: Int = 200) {
        guard let context, machine.isCurrent(exchange) else { return }
        guard let (data, contentType) = body, problem == nil else {
            return perform(machine.handlerAnswered(exchange, problem ?? .stageFailed()), context: context)
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "cache-control", value: "no-store")
        let head = UpstreamResponseHead(status: status, headers: headers, contentLength: data.count)
        let metrics = UpstreamMetrics(duration: exchange.record.upstreamDuration ?? .zero, newConnections: 0)
        // A HEAD answer describes the body it leaves out (RFC 9110 §9.3.2).
        let body = exchange.head.method == .HEAD ? nil : ByteBuffer(bytes: data)
        handlerReceived(UpstreamEvents(head: head, body: body, result: .success(metrics)), for: exchange)
    }

    /// The upstream client's events for `exchange`; stale ones (a cancelled exchange) are dropped.
    func handlerReceived(_ events: UpstreamEvents, for exchange: Exchange) {
        guard let context, machine.isCurrent(exchange) else { return }
        var events = events
        if events.head == nil, events.body != nil, !exchange.responseStarted {
            // A body part is never written before a head: whatever these bytes are, they are not
            // an answer the client can read. The clients refuse this themselves; this is the last line.
            exchange.task?.cancel()
            events = UpstreamEvents(result: .failure(ResponseFraming.bodyBeforeHead))
        }
        if let upstreamHead = events.head {
            if exchange.head.version == .http1_0 && upstreamHead.contentLength == nil {
                exchange.keepAlive = false  // an HTTP/1.0 client can only see the end of such a body as a close
            }
            var head = ProxyForwarding.responseHead(upstreamHead, version: exchange.head.version)
            ResponseDecoration.decorate(&head, for: exchange, closing: !exchange.keepAlive)
            exchange.record.status = head.status.code
            exchange.responseStarted = true
            context.write(wrapOutboundOut(.head(head)), promise: nil)
        }
        if let body = events.body {
            exchange.record.bytesSent += body.readableBytes
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            if events.result == nil { unconsumedBytes += body.readableBytes }
        }
        guard let result = events.result else {
            context.flush()
            // The bytes just written count against the client only while they wait in the channel.
            if context.channel.isWritable { returnCredit() }
            return
        }
        exchange.task = nil
        exchange.releaseConcurrencySlot()
        unconsumedBytes = 0
        switch result {
        case .success(let metrics):
            exchange.record.upstreamDuration = metrics.duration
            exchange.record.upstreamConnects = metrics.newConnections
            perform(machine.responseEnded(exchange), context: context)
        case .failure(let error):
            exchange.record.failure = error.description
            if exchange.responseStarted {
                perform(machine.responseFailed(exchange), context: context)
            } else {
                let problem = ProxyHandler.problem(for: error, backend: exchange.record.backend ?? "unknown")
                perform(machine.handlerAnswered(exchange, problem), context: context)
            }
        }
    }

    /// Gives the upstream client back the credit for body bytes that have left this handler's
    /// channel buffer, so it reads on from the backend.
    private func returnCredit() {
        guard unconsumedBytes > 0, case .handling(let exchange) = machine.state, let task = exchange.task else { return }
        let bytes = unconsumedBytes
        unconsumedBytes = 0
        task.consumed(bytes: bytes)
    }

    // MARK: Writing

    /// Writes a problem as the whole answer, logs the exchange, then ends the response as `after`
    /// says. The machine has already moved on, since writing the end may hand over the next
    /// pipelined request at once, re-entrantly.
    private func answer(
        _ exchange: Exchange, with problem: Problem, after: ExchangeStateMachine.AfterAnswer, context: ChannelHandlerContext
    ) {
        let closing = after == .close
        let body = problem.body(requestID: exchange.requestID)
        var head = problem.head(requestID: exchange.requestID, contentLength: body.readableBytes, version: exchange.head.version)
        ResponseDecoration.decorate(&head, for: exchange, closing: closing)
        exchange.record.status = problem.status.code
        exchange.record.bytesSent = body.readableBytes
        services.metrics?.problemAnswered(problem)
        accessLog.exchangeEnded(exchange)
        if after == .nextRequest { timeouts.responseEndSent() }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        if after == .discardRest && exchange.expectsBody {
            // A body is still to be dropped, and may turn out too long or malformed: the close that
            // then follows waits for this answer (only the request's end can follow otherwise).
            let written = context.eventLoop.makePromise(of: Void.self)
            earlyAnswerWritten = written.futureResult
            write(.end(nil), promise: written, context: context)
            // The rest of the body must now arrive within the head timeout, not extended by each byte.
            timeouts.drainStarted()
        } else {
            writeEnd(closing: closing, context: context)
        }
    }

    /// Closes the connection once what has been written has left: a pending flush goes first (a
    /// socket drops unflushed writes when it closes), and an early answer still on its way is
    /// waited for.
    private func close(context: ChannelHandlerContext) {
        if flushPending {
            flushPending = false
            context.flush()
        }
        guard let written = earlyAnswerWritten else { return context.close(promise: nil) }
        earlyAnswerWritten = nil
        let channel = context.channel
        written.whenComplete { _ in channel.close(promise: nil) }
    }

    private func writeEnd(closing: Bool, context: ChannelHandlerContext) {
        guard closing else { return write(.end(nil), context: context) }
        // Close once the answer has left: closing now would discard a response still queued.
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Writes `part`, flushing now unless a read batch is under way (its end flushes once).
    private func write(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>? = nil, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(part), promise: promise)
        if readingBatch { flushPending = true } else { context.flush() }
    }
}
