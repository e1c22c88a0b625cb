import NIOCore
import NIOHTTP1
import NIOHTTP2
import PorticoHTTP

/// One request sent over HTTP/2, from ``HTTP2UpstreamClient/execute(_:eventLoop:handler:)`` to its
/// result: waiting for a stream, then streaming, then finished. The ``UpstreamTask`` its caller
/// holds. Confined to its event loop (calls from elsewhere hop to it).
final class HTTP2UpstreamExchange: UpstreamTask, @unchecked Sendable {
    // Unchecked: state is touched on `eventLoop` only; `cancel` and `consumed` hop there.
    let request: UpstreamRequest
    let eventLoop: any EventLoop
    private let handler: any UpstreamResponseHandler
    private let configuration: HTTP2UpstreamClient.Configuration
    private let started = NIODeadline.now()
    private var timer: Scheduled<Void>?
    private(set) var target: HTTP2Target?
    private(set) var isFinished = false
    /// This exchange's wait opened the connection it went on.
    var openedConnection = false
    private var stream: (any Channel)?
    /// The connection it waits on for a stream, until one starts.
    private weak var waitingOn: HTTP2UpstreamConnection?
    private var headSeen = false
    /// Times it was sent again unprocessed (refused, past a GOAWAY, or never sent).
    private var refusedRetries = 0
    /// What arrived since the last delivery.
    private var pending = UpstreamEvents()
    /// Body bytes delivered and not yet consumed.
    private var unconsumed = 0
    /// The stream stopped reading for want of credit.
    private var paused = false

    init(
        request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler,
        configuration: HTTP2UpstreamClient.Configuration
    ) {
        self.request = request
        self.eventLoop = eventLoop
        self.handler = handler
        self.configuration = configuration
    }

    /// Taken by a connection (again, after a refusal): the whole-exchange timer runs from the first time.
    func start(target: HTTP2Target) {
        self.target = target
        guard timer == nil else { return }
        setTimer(at: started + TimeAmount(request.timeout))
    }

    private func setTimer(at deadline: NIODeadline) {
        timer?.cancel()
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        timer = eventLoop.scheduleTask(deadline: deadline) {
            let exchange = bound.value
            let request = exchange.request
            let waited =
                exchange.streamsEvents
                ? "no event within \(request.eventIdleTimeout ?? request.timeout)" : "no complete answer within \(request.timeout)"
            exchange.fail(UpstreamError(.timedOut, detail: waited))
        }
    }

    /// An event stream's clock (``UpstreamResponseHead/isEventStream``): the timeout runs from its
    /// last delivery, or the client's last progress through it, instead of from the start.
    private var streamsEvents = false

    private func extendStream() {
        guard !isFinished else { return }
        setTimer(at: .now() + TimeAmount(request.eventIdleTimeout ?? request.timeout))
    }

    // MARK: UpstreamTask

    func cancel() {
        guard eventLoop.inEventLoop else { return eventLoop.execute { self.cancel() } }
        guard !isFinished else { return }
        isFinished = true
        timer?.cancel()
        stream?.close(promise: nil)
        waitingOn?.withdraw(self)
        waitingOn = nil
    }

    func consumed(bytes: Int) {
        guard eventLoop.inEventLoop else { return eventLoop.execute { self.consumed(bytes: bytes) } }
        unconsumed -= bytes
        if streamsEvents { extendStream() }
        if paused && unconsumed <= configuration.lowWatermark {
            paused = false
            stream?.read()
        }
    }

    // MARK: From the stream

    /// The request as HTTP/1-shaped parts for NIO's codec: it turns `Host` into `:authority`. The
    /// fields HTTP/2 forbids are dropped and the framing is the body's, in one pass over the fields.
    var requestHead: HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(request.headers.count + 2)
        var hasHost = false
        for (name, value) in request.headers {
            if HeaderName.matchesAny(name, Self.dropped) { continue }
            if !hasHost && HeaderName.matches(name, "host") { hasHost = true }
            headers.add(name: name, value: value)
        }
        if !hasHost, let target { headers.add(name: "Host", value: target.authority) }
        if let length = request.body?.readableBytes, length > 0 { headers.add(name: "Content-Length", value: String(length)) }
        return HTTPRequestHead(
            version: .http2, method: HTTPMethod(rawValue: request.method), uri: target?.requestTarget ?? "/", headers: headers)
    }

    /// Connection-specific fields (RFC 9113 §8.2.2) and the framing, which is the body's.
    private static let dropped = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "content-length"]

    func waiting(on connection: HTTP2UpstreamConnection) {
        waitingOn = connection
    }

    func streamOpened(_ stream: any Channel) {
        waitingOn = nil
        if isFinished { return stream.close(promise: nil) }
        self.stream = stream
    }

    /// Sends it again on a new connection: it never reached the backend (the connection went
    /// before a stream started, or the backend refused it unprocessed), whatever its method.
    /// Bounded, so that a backend that refuses everything ends it.
    func sendAgainUnsent(after reason: String, client: HTTP2UpstreamClient) {
        guard !isFinished else { return }
        guard refusedRetries < configuration.maxRefusedRetries else {
            return fail(UpstreamError(.badResponse, detail: "\(reason), \(refusedRetries + 1) times"))
        }
        refusedRetries += 1
        pending = UpstreamEvents()
        client.dispatch(self)
    }

    func streamFailedToOpen(_ error: any Error) {
        fail(UpstreamError(.badResponse, detail: "could not open a stream: \(error)"))
    }

    func received(_ part: HTTPClientResponsePart) {
        guard !isFinished else { return }
        switch part {
        case .head(let head):
            // 1xx interim answers are not passed on.
            guard head.status.code >= 200 else { return }
            headSeen = true
            pending.head = UpstreamResponseHead(
                status: Int(head.status.code), headers: head.headers,
                contentLength: head.headers.first(name: "content-length").flatMap { DecimalDigits.value(of: $0.utf8, maxDigits: 18) })
        case .body(var body):
            unconsumed += body.readableBytes
            if pending.body == nil {
                pending.body = body
            } else {
                pending.body!.writeBuffer(&body)  // in place: one copy of this part, not of all before it
            }
        case .end(let trailers):
            isFinished = true
            timer?.cancel()
            pending.trailers = trailers
            pending.result = .success(
                UpstreamMetrics(duration: .nanoseconds((NIODeadline.now() - started).nanoseconds), newConnections: openedConnection ? 1 : 0)
            )
        }
    }

    /// Hands what arrived to the caller; whether the stream may read on.
    func deliver() -> Bool {
        if pending.head != nil || pending.body != nil || pending.result != nil {
            let events = pending
            pending = UpstreamEvents()
            if events.head?.isEventStream == true { streamsEvents = true }
            if streamsEvents && events.result == nil { extendStream() }
            handler.upstreamReceived(events)
        }
        guard !isFinished else { return false }
        if unconsumed >= configuration.highWatermark {
            paused = true
            return false
        }
        return true
    }

    /// The stream closed. Unanswered and refused by the backend (RST_STREAM REFUSED_STREAM, or
    /// past a GOAWAY's last stream), the request is sent again, on a new connection if need be.
    func streamClosed(refused: Bool, client: HTTP2UpstreamClient) {
        stream = nil
        guard !isFinished else { return }
        if refused && !headSeen { return sendAgainUnsent(after: "the backend refused the stream", client: client) }
        fail(UpstreamError(.badResponse, detail: headSeen ? "the backend reset the stream mid-answer" : "the backend reset the stream"))
    }

    func fail(_ error: UpstreamError) {
        guard !isFinished else { return }
        isFinished = true
        timer?.cancel()
        stream?.close(promise: nil)
        waitingOn?.withdraw(self)
        waitingOn = nil
        var events = pending
        pending = UpstreamEvents()
        events.result = .failure(error)
        handler.upstreamReceived(events)
    }
}

/// A backend stream's handler: writes the request when the stream opens, reads the answer only as
/// fast as the gateway's client takes it (the stream's autoRead is off), and tells the exchange
/// how the stream ended.
final class HTTP2UpstreamStreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private let exchange: HTTP2UpstreamExchange
    private let connection: HTTP2UpstreamConnection
    private var refused = false

    init(exchange: HTTP2UpstreamExchange, connection: HTTP2UpstreamConnection) {
        self.exchange = exchange
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        _ = context.channel.setOption(ChannelOptions.autoRead, value: false)
        exchange.streamOpened(context.channel)
        if context.channel.isActive { sendRequest(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendRequest(context: context)
        context.fireChannelActive()
    }

    private func sendRequest(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(exchange.requestHead)), promise: nil)
        if let body = exchange.request.body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        exchange.received(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if exchange.deliver() { context.read() }
    }

    /// NIO reports a stream's end with a reason as this error, just before the channel closes:
    /// REFUSED_STREAM from the backend's RST_STREAM, or for a stream past its GOAWAY's last one.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let closed = error as? NIOHTTP2Errors.StreamClosed, closed.errorCode == .refusedStream { refused = true }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        _ = exchange.deliver()
        // Past the last stream of a GOAWAY the backend sent, whatever the reset said (NIO resets
        // them CANCEL on a server's side): RFC 9113 §6.8 says those were not processed.
        let streamID = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
        let unprocessed = streamID.map { connection.isPastGoAway($0) } ?? false
        exchange.streamClosed(refused: refused || unprocessed, client: connection.client)
        connection.streamEnded()
        context.fireChannelInactive()
    }
}
