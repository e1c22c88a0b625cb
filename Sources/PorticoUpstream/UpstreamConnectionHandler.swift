import NIOCore

/// The only channel handler of one upstream connection's pipeline: it writes each request head
/// as bytes (``UpstreamRequest/http1Head(for:)``) and reads the responses with its own
/// ``HTTP1ResponseDecoder``, so nothing stands between it and the socket.
///
/// It holds no decisions of its own: each channel event goes to its
/// ``UpstreamConnectionStateMachine`` and the handler performs the returned action — write the
/// request, read, hand events to the current ``UpstreamExchange``, give the connection back to its
/// ``UpstreamConnectionPool`` or close it. Everything runs on the connection's event loop, which
/// is the event loop of the client connection the exchange serves, so the response reaches the
/// gateway with plain method calls: no lock, no hop.
///
/// The channel runs with auto-read off; reads are issued only as the state machine asks, which is
/// how a slow client slows the backend down.
final class UpstreamConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The pool's number for this connection.
    let id: Int
    private let pool: UpstreamConnectionPool
    private var machine: UpstreamConnectionStateMachine
    private var decoder = HTTP1ResponseDecoder()
    private var context: ChannelHandlerContext?
    private var exchange: UpstreamExchange?
    /// The pool has been told this connection is gone (told once, whichever way it went).
    private var poolInformed = false

    init(id: Int, pool: UpstreamConnectionPool, highWatermark: Int, lowWatermark: Int) {
        self.id = id
        self.pool = pool
        self.machine = UpstreamConnectionStateMachine(highWatermark: highWatermark, lowWatermark: lowWatermark)
    }

    /// Whether the exchange about to start is this connection's first.
    var isFresh: Bool { machine.exchangesStarted == 0 }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Calls from the exchange and the pool

    /// Writes `exchange`'s request. Returns false, having sent nothing, when this connection cannot
    /// take it (closed since it was pooled); the pool then forgets it and leases another.
    func start(_ exchange: UpstreamExchange) -> Bool {
        guard let context, context.channel.isActive else {
            discard()
            return false
        }
        switch machine.startExchange(isHeadRequest: exchange.isHeadRequest, keepAlive: exchange.keepAlive) {
        case .writeRequest(let read):
            self.exchange = exchange
            decoder.expectResponse(toHEAD: exchange.isHeadRequest)
            // No write promise (it would cost three allocations per request): whether the request
            // has left is read from the channel's outbound buffer, here and at each read batch. A
            // failed write closes the channel, which the state machine hears as inactive.
            if let body = exchange.body, body.readableBytes > 0 {
                context.write(wrapOutboundOut(exchange.head), promise: nil)
                context.writeAndFlush(wrapOutboundOut(body), promise: nil)
            } else {
                context.writeAndFlush(wrapOutboundOut(exchange.head), promise: nil)
            }
            noteRequestWritten(context: context)
            if read { context.read() }
            return true
        default:
            discard()
            return false
        }
    }

    /// The exchange's consumer wrote `bytes` of the body onwards.
    func consumed(_ bytes: Int) {
        perform(machine.consumed(bytes))
    }

    /// The exchange was abandoned or timed out: close, deliver nothing.
    func cancel() {
        exchange = nil
        perform(machine.cancel())
    }

    /// The client is shutting down.
    func shutdown() {
        perform(machine.shutdown())
    }

    /// Closes the connection at the pool's request (idle too long, or replaced); the pool has
    /// already forgotten it.
    func closeFromPool() {
        poolInformed = true
        exchange = nil
        _ = machine.cancel()
        context?.close(promise: nil)
    }

    // MARK: Channel events

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        decoder.receive(unwrapInboundIn(data))
        while machine.state != .closed {
            let part: HTTP1ResponseDecoder.Part?
            do {
                part = try decoder.next()
            } catch {
                perform(machine.responseInvalid(error))
                return
            }
            switch part {
            case .none: return
            case .interim(let status): perform(machine.interimReceived(status: status))
            case .head(let head, let framing, let keepAlive): perform(machine.headReceived(head, framing: framing, keepAlive: keepAlive))
            case .body(let bytes): perform(machine.bodyReceived(bytes))
            case .end: perform(machine.endReceived())
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        noteRequestWritten(context: context)
        perform(machine.readComplete())
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        noteRequestWritten(context: context)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        switch decoder.endOfInput() {
        case .end:
            perform(machine.endReceived())  // the body was delimited by the close
        case .truncated:
            perform(machine.responseInvalid(HTTP1ResponseDecoder.invalid("the backend closed the connection in the middle of a line")))
        case .none:
            break
        }
        perform(machine.channelInactive())
        informPool()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The only handler: errors end here, as decisions of the state machine.
        perform(machine.errorCaught(error))
    }

    // MARK: Performing actions

    /// Takes the action: the events it carries are handed on, not copied out of it.
    private func perform(_ action: consuming UpstreamConnectionStateMachine.Action) {
        switch consume action {
        case .none, .writeRequest, .unavailable:
            break
        case .read:
            context?.read()
        case .deliver(let events, let read):
            if read { context?.read() }
            exchange?.received(events)
        case .finish(let events, let reuse):
            let finished = exchange
            exchange = nil
            // The pool hears first, so that a request waiting for it (or a pipelined one the
            // gateway starts while handling this response) can have this connection.
            if reuse {
                context?.read()
                pool.connectionReleased(self)
            } else {
                discard()
            }
            finished?.completed(events)
        case .fail(let error, let retry):
            let failed = exchange
            exchange = nil
            discard()
            failed?.connectionFailed(error, retry: retry)
        case .close:
            exchange = nil
            discard()
        case .forget:
            informPool()
        }
    }

    /// Tells the state machine once the request has left: nothing is waiting in the channel's
    /// outbound buffer any more (writes leave in order, so the request went before anything later).
    private func noteRequestWritten(context: ChannelHandlerContext) {
        guard machine.isWritingRequest else { return }
        let buffered = (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 1
        if buffered == 0 { perform(machine.requestWritten()) }
    }

    /// Closes the channel (if still open) and tells the pool this connection is gone.
    private func discard() {
        if let context, context.channel.isActive { context.close(promise: nil) }
        informPool()
    }

    private func informPool() {
        guard !poolInformed else { return }
        poolInformed = true
        pool.connectionClosed(self)
    }
}
