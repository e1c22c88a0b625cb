import Logging
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoTLS
import PorticoUpstream

/// Carries each request of one connection through the stages and its response back to the client.
///
/// It decides nothing itself: the ``ExchangeStateMachine`` says what each event means (and when
/// reads are held, writes flushed and credit returned), the stages (``RequestStages``) say whether
/// a request may go on, the handlers (``ExchangeHandlers``) answer it, and this handler performs
/// what they return on the channel. One per HTTP/1.1 connection, or one per HTTP/2 stream, above
/// NIO's HTTP/2-to-HTTP/1 codec (the stream is then a connection that carries one request),
/// confined to its event loop: it also keeps pipelined requests in order, answers what the decoder
/// refuses (``Problem/parserError(_:maxHeadBytes:maxHeaderCount:)``) and lets a shutting-down
/// gateway's connections finish their last exchange, work that would otherwise take two more
/// handlers on every event.
///
/// On an HTTP/1.1 connection it is its own codec: it reads the requests from the connection's
/// bytes (``HTTP1RequestDecoder``) and writes the responses as bytes (``HTTP1ResponseSerializer``),
/// with no handler of NIO's HTTP/1.1 codec below it, no `NIOAny` box per part and no dynamic cast
/// to unwrap one. On an HTTP/2 stream it reads request parts and writes response parts, which NIO's
/// codec turns into frames.
final class GatewayHandler: ChannelDuplexHandler, RemovableChannelHandler, UpgradeResponder, StageRunDelegate {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    /// ``HTTP1ResponseSerializer``'s bytes on an HTTP/1.1 connection, or (the declared type) the
    /// parts themselves on an HTTP/2 stream: see ``ResponseWriting``.
    typealias OutboundOut = HTTPServerResponsePart

    /// What the handler reads and writes on: an HTTP/1.1 connection's bytes, or an HTTP/2 stream's
    /// parts.
    enum Wire {
        /// An HTTP/1.1 connection: the handler reads its requests from the bytes with this decoder,
        /// and writes its responses as bytes; no handler of NIO's HTTP/1.1 codec is below it.
        case http1(HTTP1RequestDecoder)
        /// An HTTP/2 stream: request parts in and response parts out, for NIO's codec below.
        case stream
    }

    /// What the handler writes to the channel below it.
    enum ResponseWriting {
        /// The bytes of HTTP/1.1 responses: the handler is its connection's encoder.
        case bytes
        /// Response parts, for the codec below (an HTTP/2 stream's).
        case parts
    }

    private let services: GatewayServices
    private let stages: RequestStages
    private let handlers: ExchangeHandlers
    private let accessLog: AccessLogObserver
    /// The same connection's (or stream's) timeout handler, told where each request stands.
    private let timeouts: TimeoutHandler
    private var machine = ExchangeStateMachine<Exchange>()
    /// The policy as this connection last read it (one atomic load per request; see ``PolicyStore``).
    private var policy: PolicyStore.Reader
    /// The end of an answer given before its request ended, while the rest of the request is
    /// dropped: a close decided meanwhile (the rest is too long, or malformed) waits for it.
    private var earlyAnswerWritten: EventLoopFuture<Void>?
    /// A stage that needs the whole body (``StageOutcome/awaitBody``), resumed at the request's end.
    private var resumeAtRequestEnd: (() -> Void)?
    private var client: ClientConnection
    private var context: ChannelHandlerContext?
    /// The response under way is an event stream: its heartbeat and lifetime.
    private var eventStream: (exchange: Exchange, keeper: EventStreamKeeper?)?

    /// An HTTP/2 stream's note of its extended CONNECT (RFC 8441); `nil` on an HTTP/1.1 connection.
    private let tunnel: ExtendedConnect?
    private let writing: ResponseWriting
    /// The framing of the response under way, when ``writing`` is ``ResponseWriting/bytes``.
    private var serializer = HTTP1ResponseSerializer()
    /// An HTTP/1.1 connection's request decoder; nil on an HTTP/2 stream.
    private var decoder: HTTP1RequestDecoder?

    /// - Parameters:
    ///   - client: what is known of the client before the first request: an HTTP/2 stream's
    ///     connection has completed its TLS handshake already.
    ///   - tunnel: on an HTTP/2 stream, where its ``ExtendedConnectReader`` notes a `:protocol`.
    ///   - wire: bytes on an HTTP/1.1 connection, parts on an HTTP/2 stream.
    init(
        services: GatewayServices, handlers: ExchangeHandlers, timeouts: TimeoutHandler, stages: RequestStages,
        client: ClientConnection = ClientConnection(), tunnel: ExtendedConnect? = nil, wire: Wire
    ) {
        self.client = client
        self.tunnel = tunnel
        switch wire {
        case .http1(let decoder):
            self.writing = .bytes
            self.decoder = decoder
        case .stream:
            self.writing = .parts
        }
        self.services = services
        self.policy = PolicyStore.Reader(services.store)
        self.stages = stages
        self.handlers = handlers
        self.accessLog = AccessLogObserver(logger: services.accessLogger, writer: services.accessLogWriter)
        self.timeouts = timeouts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // An HTTP/2 stream's connection has worked these out once for all its streams.
        if client.address == nil {
            client.address = context.channel.remoteAddress?.ipAddress
            client.addressSubject = ClientAddress.rateLimitSubject(context.channel.remoteAddress)
            client.peerBytes = ClientAddress.bytes(context.channel.remoteAddress)
            client.addressBytes = client.peerBytes
        }
    }

    /// Leaving a connection whose request switched protocols (``StreamJoin``), it hands on what the
    /// client sent after that request, to the handler that carries the new protocol.
    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        if let unread = decoder?.takeUnread() { context.fireChannelRead(NIOAny(unread)) }
    }

    // MARK: Inbound

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let completed as TLSHandshakeCompleted:
            // Counted by the ALPNProtocolSelector, which built this pipeline.
            client.tls = completed.info
            client.certificate = completed.certificate
        case is ChannelShouldQuiesceEvent:
            perform(machine.quiesce(), context: context)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard decoder != nil else {
            let part = unwrapInboundIn(data)
            guard machine.takesNow(part) else { return }
            return receive(part, context: context)
        }
        decoder!.receive(ConnectionBytes.unwrapInboundIn(data))
        // Every part the read holds, each to the machine now or to the pipelining queue; then the
        // refusal of what follows them, if the decoder refuses it.
        do {
            while let part = try decoder!.next() {
                guard machine.takesNow(part) else { continue }
                receive(part, context: context)
            }
        } catch {
            guard machine.takesParserErrorNow(error) else { return }
            refuse(error, context: context)
        }
    }

    private func receive(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            let compiled = policy.current()
            let trusted = compiled.snapshot.policy.trustedProxies
            let client = trusted.isEmpty ? client : ClientAddressRule.resolve(client, headers: head.headers, trusted: trusted)
            let exchange = Exchange(head: head, requestID: RequestID.of(head), policy: compiled, client: client)
            if let tunnelled = tunnel?.requestedProtocol {
                // An extended CONNECT's stream carries the tunnel's bytes, not a body: the request
                // is whole with its head, and the handler may start.
                exchange.tunnelProtocol = tunnelled
                exchange.framing.requestEnded = true
            }
            if let tracer = compiled.tracer { exchange.trace = ExchangeTrace(tracer, head: head, client: exchange.client) }
            perform(machine.headReceived(exchange), context: context)
        case .body(let part):
            perform(machine.bodyReceived(part), context: context)
        case .end:
            perform(machine.endReceived(), context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if machine.readBatchEnded() { context.flush() }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { returnCredit() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // A request cut short is refused before the close is seen, as NIO's decoder refused it.
        if let error = decoder?.endOfInput(), machine.takesParserErrorNow(error) { refuse(error, context: context) }
        // First, so that an event stream's line in the access log, written as the exchange ends
        // here, says how it ended.
        eventStreamEnded(.clientClosed)
        perform(machine.channelInactive(), context: context)
        context.fireChannelInactive()
    }

    /// An error from below (TLS, the socket, an HTTP/2 stream's codec): the connection closes. What
    /// the request decoder refuses is answered instead (``refuse(_:context:)``).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        close(context: context)
    }

    private func refuse(_ error: HTTPParserError, context: ChannelHandlerContext) {
        let limits = policy.current().snapshot.limits
        let problem = Problem.parserError(error, maxHeadBytes: limits.maxHeadBytes, maxHeaderCount: limits.maxHeaderCount)
        perform(machine.parserErrorReceived(problem), context: context)
    }

    // MARK: Pipelining

    /// Holds a read back while pipelined parts wait (see ``PipelinedRequests``).
    ///
    /// Holds reads too once a request that asks to switch protocols has ended: what the client
    /// sends after it is not HTTP, and would only pile up in the decoder until the switch happens
    /// (``StreamJoin`` reads again once this handler has left) or the answer closes the connection.
    func read(context: ChannelHandlerContext) {
        if decoder?.switchedProtocols == true { return }
        if case .read = machine.readRequested() { context.read() }
    }

    /// Hands waiting parts to the machine for as long as it takes them; then passes on a held read.
    private func deliverPipelined(context: ChannelHandlerContext) {
        guard machine.deliveryBegins() else { return }
        while let event = machine.nextPipelined() {
            switch event {
            case .part(let part): receive(part, context: context)
            case .parserError(let error): refuse(error, context: context)
            }
        }
        if machine.deliveryEnds() { context.read() }
    }

    // MARK: Stages

    func isAdmitting(_ exchange: Exchange) -> Bool { machine.isAdmitting(exchange) }

    func whenRequestEnds(_ exchange: Exchange, resume: @escaping () -> Void) {
        guard let context, machine.isAdmitting(exchange) else { return }
        if exchange.framing.requestEnded { return resume() }
        resumeAtRequestEnd = resume
        // A client waiting on `100 Continue` would never send what the stage waits for.
        if exchange.framing.awaitingContinue {
            exchange.framing.awaitingContinue = false
            writeHead(
                HTTPResponseHead(version: exchange.head.version, status: .continue), answering: exchange.head.method, context: context)
            context.flush()
        }
    }

    /// The stages have run. If one refused a request that was signed genuinely and its nonce is
    /// not recorded yet (a stage between authentication and the rate-limit stage, which hands the
    /// nonce to the store, refused it: the version stage), the nonce is recorded now, in the key's
    /// share: a refused request can never be admitted later. The store's verdict on it changes
    /// nothing: the answer is `problem`.
    func stagesFinished(_ exchange: Exchange, answer problem: Problem?) {
        guard let context else { return }
        if problem != nil, let nonce = exchange.pendingNonce {
            exchange.pendingNonce = nil
            _ = services.limits.admit(LimitRequest(service: "", nonce: nonce), on: context.eventLoop)
        }
        perform(machine.stagesFinished(exchange, answer: problem), context: context)
    }

    // MARK: Actions

    private func perform(_ action: ExchangeStateMachine<Exchange>.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .runStages(let exchange):
            timeouts.requestHeadReceived(expectsBody: exchange.framing.expectsBody)
            stages.run(exchange, on: context.eventLoop, reportingTo: self)
        case .requestEnded:
            timeouts.requestEndReceived()
            if let resume = resumeAtRequestEnd {
                resumeAtRequestEnd = nil
                resume()
            }
        case .sendContinue(let exchange):
            writeHead(
                HTTPResponseHead(version: exchange.head.version, status: .continue), answering: exchange.head.method, context: context)
            if machine.wrote() { context.flush() }
        case .handle(let exchange):
            timeouts.requestEndReceived()
            // The body's digest is checked once it is whole, before any handler sees it.
            if let problem = ContentDigestCheck.problem(for: exchange) ?? PayloadHashCheck.problem(for: exchange)
                ?? handlers.start(exchange, on: context.eventLoop, responder: self)
            {
                perform(machine.handlerAnswered(exchange, problem), context: context)
            }
        case .answer(let exchange, let problem, let after):
            answer(exchange, with: problem, after: after, context: context)
        case .finishResponse(let exchange, let closing):
            eventStreamEnded(.backendClosed)
            accessLog.exchangeEnded(exchange)
            if !closing { timeouts.responseEndSent() }
            writeEnd(closing: closing, trailers: exchange.responseTrailers, context: context)
        case .abortResponse(let exchange):
            eventStreamEnded(.failed)
            accessLog.exchangeEnded(exchange)
            context.flush()
            context.close(promise: nil)
        case .drainFinished:
            earlyAnswerWritten = nil
            timeouts.requestEndReceived()
            timeouts.responseEndSent()
        case .abandon(let exchange):
            eventStreamEnded(.clientClosed)
            exchange.abandon()
            accessLog.exchangeEnded(exchange)
        case .close:
            close(context: context)
        case .refuse(let problem, let exchange):
            let (head, body) = ResponseDecoration.refusal(problem, of: exchange)
            if let exchange { accessLog.exchangeEnded(exchange) }
            // Written and flushed at once: the decoder stops here, and the close follows the answer.
            writeHead(head, answering: exchange?.head.method, body: body, context: context)
            writeEnd(closing: true, context: context)
        }
        if machine.hasWaitingInput { deliverPipelined(context: context) }
    }

    // MARK: Responses

    func handlerAnswered(_ problem: Problem, for exchange: Exchange) {
        guard let context, machine.isCurrent(exchange) else { return }
        perform(machine.handlerAnswered(exchange, problem), context: context)
    }

    /// The upstream client's events for `exchange`; stale ones (a cancelled exchange) are dropped.
    func handlerReceived(_ events: UpstreamEvents, for exchange: Exchange) {
        guard let context, machine.isCurrent(exchange) else { return }
        if let refusal = exchange.refusal(of: events) { return write(refusal, for: exchange, context: context) }
        write(events, for: exchange, context: context)
    }

    /// Writes the upstream client's `events` for the current `exchange`, which may all be written.
    private func write(_ events: UpstreamEvents, for exchange: Exchange, context: ChannelHandlerContext) {
        if let upstreamHead = events.head {
            let closing = machine.responseBegins(exchange, lengthKnown: upstreamHead.contentLength != nil)
            // A short body that came with its head leaves with it, in one write.
            switch writing {
            case .bytes:
                let bytes = ResponseDecoration.headBytes(upstreamHead, for: exchange, closing: closing, serializer: &serializer)
                write(headBytes: consume bytes, body: events.body, context: context)
            case .parts:
                let head = ResponseDecoration.head(upstreamHead, for: exchange, closing: closing)
                writeHead(head, answering: exchange.head.method, body: events.body, context: context)
            }
            if upstreamHead.isEventStream {
                if events.result == nil {
                    eventStreamBegins(exchange, head: upstreamHead)
                } else if exchange.outcome.streamEnding == nil {
                    // The whole stream came at once (a short one, or a loaded gateway): nothing to
                    // keep open, but its line says how it ended, as any stream's does.
                    let ending: UpgradedStream.Ending
                    if case .success = events.result { ending = .backendClosed } else { ending = .failed }
                    exchange.outcome.streamEnding = ending.rawValue
                }
            }
        }
        if let body = events.body {
            eventStream?.keeper?.written(body)
            exchange.outcome.bytesSent += body.readableBytes
            if events.head == nil { writeBody(body, context: context) }
            if events.result == nil { machine.responseBodyWritten(bytes: body.readableBytes) }
        }
        guard let result = events.result else {
            context.flush()
            // The bytes just written count against the client only while they wait in the channel.
            if context.channel.isWritable { returnCredit() }
            return
        }
        if let trailers = events.trailers, exchange.head.version.major == 2 { exchange.responseTrailers = trailers }
        // Past an event stream's head, the one limit that times out is the wait for its next event
        // (a lifetime's end has said so already).
        if case .failure(let error) = result, error.kind == .timedOut, eventStream?.exchange === exchange,
            exchange.outcome.streamEnding == nil
        {
            exchange.outcome.streamEnding = UpgradedStream.Ending.idle.rawValue
        }
        switch exchange.handlerEnded(result) {
        case .success: perform(machine.responseEnded(exchange), context: context)
        case .failure where exchange.outcome.responseStarted: perform(machine.responseFailed(exchange), context: context)
        case .failure(let problem): perform(machine.handlerAnswered(exchange, problem), context: context)
        }
    }

    /// The backend switched to WebSocket: the `101` goes to the client, and the connection becomes
    /// one side of an ``UpgradedStream`` (this handler leaves it). The exchange is logged when the
    /// stream ends, with the bytes each way and how it ended.
    func handlerSwitched(_ exchange: Exchange, head upstreamHead: UpstreamResponseHead, backend: any Channel, lease: StreamLease) {
        guard let context, machine.isCurrent(exchange) else {
            backend.close(promise: nil)
            return lease.end()
        }
        exchange.task = nil
        exchange.releaseConcurrencySlot()
        var head = ResponseDecoration.head(upstreamHead, for: exchange, closing: false)
        head.headers.remove(name: "connection")
        let tunnelled = exchange.tunnelProtocol != nil
        if tunnelled {
            // RFC 8441 §5: an HTTP/2 stream's WebSocket opens with a 2xx, and no accept to prove.
            head.status = .ok
            exchange.outcome.status = 200
            for name in ["upgrade", "sec-websocket-accept"] { head.headers.remove(name: name) }
        } else {
            head.headers.add(name: "Connection", value: "Upgrade")
            head.headers.add(name: "Upgrade", value: "websocket")
        }
        writeHead(head, answering: exchange.head.method, context: context)
        context.flush()
        let accessLog = self.accessLog
        let limits = exchange.routed?.service.policy.streams ?? ServiceStreamLimits()
        do {
            let join = tunnelled ? StreamJoin.joinTunnel : StreamJoin.join
            let stream = try join(context, backend, limits) { stream in
                exchange.outcome.bytesSent = stream.bytesFromBackend
                exchange.outcome.bytesReceived = stream.bytesFromClient
                exchange.outcome.streamEnding = stream.ending?.rawValue
                lease.end()
                accessLog.exchangeEnded(exchange)
            }
            let bound = NIOLoopBound(stream, eventLoop: stream.eventLoop)
            let loop = stream.eventLoop
            lease.opened { reason in loop.execute { bound.value.close(reason) } }
            stream.start()
        } catch {
            // The connection is still this handler's (a join changes nothing before what can
            // fail has passed): its close ends the exchange, logged once. An HTTP/2 stream has had
            // its 200 already; the close resets it.
            exchange.outcome.failure = "joining the WebSocket connections: \(error)"
            backend.close(promise: nil)
            lease.end()
            context.close(promise: nil)
        }
    }

    /// An event stream's head went out: it counts as open, and the service's heartbeat and
    /// lifetime start. At its lifetime a chunked stream ends as if the backend had ended it (an
    /// EventSource reconnects, with its Last-Event-ID); one with a length cannot end early, and is
    /// cut.
    private func eventStreamBegins(_ exchange: Exchange, head: UpstreamResponseHead) {
        guard let context, let service = exchange.routed?.service.policy else { return }
        services.metrics?.streamOpened(.eventStream)
        let lengthKnown = head.contentLength != nil
        // A comment cannot be added to a body of a declared length, nor to one the backend encoded.
        let heartbeat = lengthKnown || head.fields.contains(name: "content-encoding") ? nil : service.heartbeat
        // Nothing to keep without a heartbeat or a lifetime: an open stream then costs no more
        // than any response under way.
        guard heartbeat != nil || service.streams.maxLifetime != nil else {
            eventStream = (exchange, nil)
            return
        }
        let keeper = EventStreamKeeper(
            eventLoop: context.eventLoop, heartbeat: heartbeat, maxLifetime: service.streams.maxLifetime,
            actions: .init(
                write: { [weak self] bytes in
                    guard let self, let context = self.context, self.machine.isCurrent(exchange) else { return }
                    exchange.outcome.bytesSent += bytes.readableBytes
                    self.writeBody(bytes, context: context)
                    context.flush()
                },
                expire: { [weak self] in
                    guard let self, self.machine.isCurrent(exchange) else { return }
                    exchange.outcome.streamEnding = UpgradedStream.Ending.lifetime.rawValue
                    exchange.task?.cancel()
                    let result: Result<UpstreamMetrics, UpstreamError> =
                        lengthKnown
                        ? .failure(UpstreamError(.timedOut, detail: "event stream at its lifetime"))
                        : .success(UpstreamMetrics(duration: exchange.outcome.upstreamDuration ?? .zero, newConnections: 0))
                    self.handlerReceived(UpstreamEvents(result: result), for: exchange)
                }))
        eventStream = (exchange, keeper)
    }

    /// The event stream under way (if any) has ended: its timers stop, and its line in the access
    /// log says how, unless that is known already (its lifetime).
    private func eventStreamEnded(_ ending: UpgradedStream.Ending) {
        guard let (exchange, keeper) = eventStream else { return }
        eventStream = nil
        keeper?.stop()
        if exchange.outcome.streamEnding == nil { exchange.outcome.streamEnding = ending.rawValue }
        services.metrics?.streamClosed(.eventStream)
    }

    /// Gives the upstream client back the credit for body bytes that have left this handler's
    /// channel buffer, so it reads on from the backend.
    private func returnCredit() {
        guard let (exchange, bytes) = machine.creditDue() else { return }
        exchange.task?.consumed(bytes: bytes)
    }

    // MARK: Writing

    /// Writes a problem as the whole answer, logs the exchange, then ends the response as `after`
    /// says. The machine has already moved on, since writing the end may hand over the next
    /// pipelined request at once, re-entrantly.
    private func answer(
        _ exchange: Exchange, with problem: Problem, after: ExchangeStateMachine<Exchange>.AfterAnswer, context: ChannelHandlerContext
    ) {
        let closing = after == .close
        let (head, body) = ResponseDecoration.answer(problem, for: exchange, closing: closing)
        if let metrics = services.metrics {
            metrics.problemAnswered(problem)
            metrics.recentProblems.record(
                type: problem.type, status: Int(problem.status.code), service: exchange.routed?.service.name, requestID: exchange.requestID)
        }
        accessLog.exchangeEnded(exchange)
        if after == .nextRequest { timeouts.responseEndSent() }
        writeHead(head, answering: exchange.head.method, body: body, context: context)
        if after == .discardRest && exchange.framing.expectsBody {
            // A body is still to be dropped, and may turn out too long or malformed: the close that
            // then follows waits for this answer (only the request's end can follow otherwise).
            let written = context.eventLoop.makePromise(of: Void.self)
            earlyAnswerWritten = written.futureResult
            writeEnd(nil, promise: written, context: context)
            if machine.wrote() { context.flush() }
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
        if machine.takePendingFlush() { context.flush() }
        guard let written = earlyAnswerWritten else { return context.close(promise: nil) }
        earlyAnswerWritten = nil
        let channel = context.channel
        written.whenComplete { _ in channel.close(promise: nil) }
    }

    /// Ends the response under way, flushing now unless a read batch is under way (its end flushes
    /// once); when `closing`, flushes and closes the connection once the end has left.
    private func writeEnd(closing: Bool, trailers: HTTPHeaders? = nil, context: ChannelHandlerContext) {
        guard closing else {
            writeEnd(trailers, promise: nil, context: context)
            if machine.wrote() { context.flush() }
            return
        }
        // Close once the answer has left: closing now would discard a response still queued.
        let channel = context.channel
        let written = context.eventLoop.makePromise(of: Void.self)
        writeEnd(trailers, promise: written, context: context)
        context.flush()
        written.futureResult.whenComplete { _ in channel.close(promise: nil) }
    }

    // MARK: The wire

    /// Writes a response head, and `body` with it when one is given: on an HTTP/1.1 connection as
    /// one buffer when the body is short.
    private func writeHead(_ head: HTTPResponseHead, answering method: HTTPMethod?, body: ByteBuffer? = nil, context: ChannelHandlerContext)
    {
        guard case .bytes = writing else {
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            if let body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            return
        }
        write(headBytes: serializer.head(head, answering: method), body: body, context: context)
    }

    /// Writes a head's bytes, with `body` in the same buffer when it is short (consumed, so that the
    /// body is appended to the head's storage, not to a copy of it).
    private func write(headBytes: consuming ByteBuffer, body: ByteBuffer?, context: ChannelHandlerContext) {
        guard let body, !serializer.append(body: body, to: &headBytes) else { return context.write(NIOAny(headBytes), promise: nil) }
        context.write(NIOAny(headBytes), promise: nil)
        writeBody(body, context: context)
    }

    private func writeBody(_ body: ByteBuffer, context: ChannelHandlerContext) {
        guard case .bytes = writing else { return context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        switch serializer.body(body) {
        case .none:
            break
        case .one(let bytes):
            context.write(NIOAny(bytes), promise: nil)
        case .chunk(let size, let data, let lineEnd):
            context.write(NIOAny(size), promise: nil)
            context.write(NIOAny(data), promise: nil)
            context.write(NIOAny(lineEnd), promise: nil)
        }
    }

    /// Writes the end of the response; `promise` completes once everything before it has left.
    private func writeEnd(_ trailers: HTTPHeaders?, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        guard case .bytes = writing else { return context.write(wrapOutboundOut(.end(trailers)), promise: promise) }
        if let bytes = serializer.end(trailers) {
            context.write(NIOAny(bytes), promise: promise)
        } else if let promise {
            // Nothing to write, but the promise completes in order with the writes before it.
            context.write(NIOAny(ByteBuffer()), promise: promise)
        }
    }
}

/// The type through which a channel read's `NIOAny` gives up the bytes of an HTTP/1.1 connection to
/// ``GatewayHandler`` (whose declared inbound type is an HTTP/2 stream's parts): NIO unwraps a
/// `ByteBuffer` without a cast, but only through a handler type whose input it is. Never made.
private final class ConnectionBytes: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
}
