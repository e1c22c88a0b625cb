import NIOCore
import NIOHTTP1
import PorticoTLS

/// Enforces the head/body read timeout, the keep-alive idle timeout and the send timeout on one
/// HTTP/1.1 connection (``ConnectionTimeoutHandler``) or on one HTTP/2 stream
/// (``StreamTimeoutHandler``): the timers and the held write are here, what is read and how a late
/// request is answered or cut off are the subclass's. A base class rather than a generic one, so
/// that each handler's methods are concrete code (NIO's unwrapping of a generic `InboundIn` is a
/// dynamic cast on every read).
///
/// It sees every inbound byte (or body part) and every outbound flush with its completion.
///
/// Send progress is watched once per flush, not once per write: the last write before each flush
/// is held back until the flush (or a close) and passed on with a promise (the writer's own, or
/// one made here), whose completion means every write of that flush has left, since a channel
/// completes writes in order. The writes before it pass straight on with whatever promise their
/// writer gave, so a response written as head, body and end costs one completion callback, not
/// three promises and three callbacks. Most flushes need not even that: a flush writes to the
/// socket there and then, and when the channel holds nothing unwritten afterwards (a small
/// response to a client that reads), nothing waits and nothing is watched. Only when bytes wait
/// does an empty write follow them with a promise, completed once they have left (on an HTTP/1.1
/// connection, whose writes are bytes; an HTTP/2 stream's flushes are always watched through
/// their last write). The request handler of the same connection
/// tells it where a request stands by calling ``requestHeadReceived(expectsBody:)``,
/// ``requestEndReceived()`` and ``responseEndSent()`` directly (both live on the connection's event
/// loop), rather than sending events through the whole pipeline three times per request.
///
/// Time is read from `context.eventLoop.now`, so tests on an `EmbeddedChannel` drive it with
/// `advanceTime(by:)`.
class TimeoutHandler {
    private var machine: ConnectionTimeoutStateMachine
    private var timer: Scheduled<Void>?
    /// When the scheduled timer task runs; `nil` when none is scheduled.
    private var wakeUp: NIODeadline?
    /// When the read timer (idle or head) expires; `nil` when the state machine wants none.
    private var readDeadline: NIODeadline?
    /// When the send timer expires; `nil` when nothing waits to be written.
    private var sendDeadline: NIODeadline?
    private var context: ChannelHandlerContext?
    /// The latest write since the last flush, not yet passed on (see the type's comment).
    private var heldWrite: (data: NIOAny, promise: EventLoopPromise<Void>?)?
    private let headTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private let sendTimeout: TimeAmount
    /// For tests on an `EmbeddedChannel`, whose stand-in socket (`StuckSocket`) holds bytes the
    /// channel does not count: the bytes that socket holds unwritten. `nil`: the channel's count.
    var unwrittenBytesForTesting: (() -> Int)?

    /// - Parameter minBodyRate: bytes per second a body must keep up with once `headTimeout` has
    ///   passed since its head; 0 for no minimum.
    init(headTimeout: TimeAmount, idleTimeout: TimeAmount, sendTimeout: TimeAmount, minBodyRate: Int = 0) {
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
        self.sendTimeout = sendTimeout
        self.machine = ConnectionTimeoutStateMachine(minBodyRate: minBodyRate, bodyGrace: headTimeout)
    }

    final func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { perform(machine.connectionOpened(), context: context) }
    }

    final func handlerRemoved(context: ChannelHandlerContext) {
        stopTimers()
        self.context = nil
        heldWrite.take()?.promise?.fail(ChannelError.ioOnClosedChannel)
    }

    final func channelActive(context: ChannelHandlerContext) {
        perform(machine.connectionOpened(), context: context)
        context.fireChannelActive()
    }

    final func channelInactive(context: ChannelHandlerContext) {
        passHeldWrite(context: context)  // to fail as the channel fails any write now
        perform(machine.connectionClosed(), context: context)
        context.fireChannelInactive()
    }

    /// What a read carried, for the head and body timers (the subclass's `channelRead` counts it).
    final func received(bytes: Int, context: ChannelHandlerContext) {
        perform(machine.bytesReceived(bytes, now: context.eventLoop.now), context: context)
    }

    final func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { perform(machine.becameWritable(), context: context) }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Outbound

    final func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        passHeldWrite(context: context)
        heldWrite = (data, promise)
    }

    /// Passes the held write on and flushes. Watched (see the type's comment) when its writer
    /// gave it a promise, when an earlier flush is still being written, when the channel cannot
    /// count what it holds, or when bytes are left unwritten after the flush: each promise and
    /// its callback are an allocation, and most flushes leave at once.
    final func flush(context: ChannelHandlerContext) {
        guard let held = heldWrite.take() else { return context.flush() }
        if held.promise == nil, machine.sending == .caughtUp, let marker = emptyWrite() {
            context.write(held.data, promise: nil)
            context.flush()
            if unwrittenBytes(context) == 0 { return }
            // Bytes wait: an empty write after them completes once they have left.
            watch(marker, promise: nil, context: context)
        } else {
            watch(held.data, promise: held.promise, context: context)
        }
        context.flush()
    }

    /// Writes `data` with a promise (the writer's own, or one made here) whose completion reports
    /// the flush's completion to the state machine.
    private func watch(_ data: NIOAny, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        let written = promise ?? context.eventLoop.makePromise()
        perform(machine.flushQueued(), context: context)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in
            let (handler, context) = bound.value
            handler.perform(handler.machine.flushCompleted(), context: context)
        }
        context.write(data, promise: written)
    }

    /// What the channel holds unwritten; nil when it cannot say.
    private func unwrittenBytes(_ context: ChannelHandlerContext) -> Int? {
        if let unwrittenBytesForTesting { return unwrittenBytesForTesting() }
        return try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)
    }

    final func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        passHeldWrite(context: context)  // in order: what the handlers below do with unflushed writes at a close
        context.close(mode: mode, promise: promise)
    }

    final func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        passHeldWrite(context: context)
        context.triggerUserOutboundEvent(event, promise: promise)
    }

    /// Passes the held write on as it is: no flush follows it (yet), so there is no flush to watch.
    private func passHeldWrite(context: ChannelHandlerContext) {
        guard let held = heldWrite.take() else { return }
        context.write(held.data, promise: held.promise)
    }

    // MARK: Progress reported by the request handler
    //
    // The ``GatewayHandler`` above calls these directly (both live on the same event loop), rather
    // than sending events through the pipeline three times per request.

    final func requestHeadReceived(expectsBody: Bool) {
        guard let context else { return }
        perform(machine.requestHeadReceived(expectsBody: expectsBody, now: context.eventLoop.now), context: context)
    }

    final func drainStarted() {
        guard let context else { return }
        perform(machine.drainStarted(), context: context)
    }

    final func requestEndReceived() {
        guard let context else { return }
        perform(machine.requestEndReceived(), context: context)
    }

    final func responseEndSent() {
        guard let context else { return }
        perform(machine.responseEndSent(), context: context)
    }

    private func perform(_ action: ConnectionTimeoutStateMachine.Action, context: ChannelHandlerContext) {
        // Removed (a connection upgraded to WebSocket): a write completing late must not arm a timer.
        guard self.context != nil else { return }
        switch action {
        case .none:
            break
        case .cancelTimer:
            readDeadline = nil
        case .cancelSendTimer:
            sendDeadline = nil
        case .startTimer(let kind):
            let now = context.eventLoop.now
            let newDeadline: NIODeadline
            switch kind {
            case .idle:
                newDeadline = now + idleTimeout
                readDeadline = newDeadline
            case .head:
                newDeadline = now + headTimeout
                readDeadline = newDeadline
            case .body(let notAfter):
                newDeadline = notAfter.map { min($0, now + headTimeout) } ?? now + headTimeout
                readDeadline = newDeadline
            case .send:
                newDeadline = now + sendTimeout
                sendDeadline = newDeadline
            }
            if let wakeUp, wakeUp <= newDeadline { return }  // the pending wake-up comes first; it re-arms
            scheduleWakeUp(at: min(newDeadline, now + granularity), context: context)
        case .stopTimers:
            stopTimers()
        case .close:
            readDeadline = nil
            context.close(promise: nil)
        case .respondTimeoutAndClose:
            readDeadline = nil
            let response = timeoutResponse(Problem.requestTimeout(), requestID: RequestID.generate())
            let channel = context.channel
            let written = context.eventLoop.makePromise(of: Void.self)
            // Sent like any response, so a client that does not read it meets the send timeout.
            for (index, part) in response.enumerated() {
                write(context: context, data: part, promise: index == response.count - 1 ? written : nil)
            }
            flush(context: context)
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
        case .closeImmediately:
            stopTimers()
            closeImmediately(context)
        }
    }

    // MARK: The timer
    //
    // Deadlines move on every request (first byte, head, response end) and on every completed
    // write, but the timer task does not: it wakes at most every `granularity` (the shortest of the
    // timeouts), compares the clock with the current deadlines and either fires the state machine
    // or sleeps again. Moving a deadline is then an assignment, not a cancel and a schedule on the
    // event loop's timer heap, and since a wake-up is never further away than the shortest timeout,
    // no deadline is ever missed.

    private var granularity: TimeAmount { min(headTimeout, idleTimeout, sendTimeout) }

    private func scheduleWakeUp(at time: NIODeadline, context: ChannelHandlerContext) {
        timer?.cancel()
        wakeUp = time
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: time) {
            let (handler, context) = bound.value
            handler.wokeUp(context: context)
        }
    }

    private func wokeUp(context: ChannelHandlerContext) {
        timer = nil
        wakeUp = nil
        let now = context.eventLoop.now
        if let deadline = sendDeadline, now >= deadline {
            sendDeadline = nil
            perform(machine.sendTimerFired(), context: context)
        }
        if let deadline = readDeadline, now >= deadline {
            readDeadline = nil
            perform(machine.timerFired(), context: context)
        }
        // Sleep again towards whichever deadline is left (none: the next one schedules anew).
        guard wakeUp == nil, let next = [readDeadline, sendDeadline].compactMap({ $0 }).min() else { return }
        scheduleWakeUp(at: min(next, now + granularity), context: context)
    }

    private func stopTimers() {
        timer?.cancel()
        timer = nil
        wakeUp = nil
        readDeadline = nil
        sendDeadline = nil
    }

    // MARK: What the subclass says

    /// A write of nothing, which the channel completes after every write before it; nil where
    /// writes are not bytes (an HTTP/2 stream's parts), whose flushes are then always watched
    /// through their last write.
    func emptyWrite() -> NIOAny? { nil }

    /// The 408 for a request whose head or body came too late, as the parts to write.
    func timeoutResponse(_ problem: Problem, requestID: String) -> [NIOAny] {
        preconditionFailure("a TimeoutHandler subclass answers its own timeouts")
    }

    /// Ends what is guarded at once, dropping whatever is unwritten.
    func closeImmediately(_ context: ChannelHandlerContext) {
        context.close(promise: nil)
    }
}

/// The HTTP/1.1 connection's timeouts: the handler sits directly above the socket (or the TLS
/// handler), sees every inbound byte, and answers a late head with 408 as raw bytes, because the
/// HTTP codec may hold a half-parsed request at that moment.
final class ConnectionTimeoutHandler: TimeoutHandler, ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    /// Whatever the codec above writes (it is passed on untouched; only its completion is watched).
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received(bytes: unwrapInboundIn(data).readableBytes, context: context)
        context.fireChannelRead(data)
    }

    override func timeoutResponse(_ problem: Problem, requestID: String) -> [NIOAny] {
        [wrapOutboundOut(.byteBuffer(problem.rawResponse(requestID: requestID)))]
    }

    override func emptyWrite() -> NIOAny? { wrapOutboundOut(.byteBuffer(ByteBuffer())) }

    override func closeImmediately(_ context: ChannelHandlerContext) {
        // The TLS handler, if there is one, drops its close_notify; the close then ends the socket.
        context.triggerUserOutboundEvent(CloseImmediatelyEvent(), promise: nil)
        context.close(promise: nil)
    }
}

/// One HTTP/2 stream's timeouts, between NIO's HTTP/2-to-HTTP/1 codec and the ``GatewayHandler``:
/// the request is whole-headed when the stream opens, so the timers that matter are the body's and
/// the send timer (a client that holds the stream's window at zero). Cutting off resets the
/// stream only; the connection carries on.
final class StreamTimeoutHandler: TimeoutHandler, ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The request is a gRPC call: its 408 is gRPC's Trailers-Only answer, as the gateway's other
    /// refusals are (``GRPCAnswer``).
    private var isGRPC = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            isGRPC = GRPCAnswer.isGRPC(head)
            received(bytes: 0, context: context)
        case .body(let body):
            received(bytes: body.readableBytes, context: context)
        case .end:
            received(bytes: 0, context: context)
        }
        context.fireChannelRead(data)
    }

    override func timeoutResponse(_ problem: Problem, requestID: String) -> [NIOAny] {
        let body = problem.body(requestID: requestID)
        let head = problem.head(requestID: requestID, contentLength: body.readableBytes)
        guard !isGRPC else {
            return [wrapOutboundOut(.head(GRPCAnswer.head(replacing: head, problemTitle: problem.title))), wrapOutboundOut(.end(nil))]
        }
        return [wrapOutboundOut(.head(head)), wrapOutboundOut(.body(.byteBuffer(body))), wrapOutboundOut(.end(nil))]
    }
}
