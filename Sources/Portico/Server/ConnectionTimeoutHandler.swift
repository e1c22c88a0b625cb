import NIOCore
import PorticoTLS

/// Enforces the head/body read timeout, the keep-alive idle timeout and the send timeout on one
/// connection.
///
/// It sits directly above the socket (or the TLS handler) so it sees every inbound byte, and every
/// outbound flush with its completion; its 408 answer is written as raw bytes because the HTTP
/// codec may hold a half-parsed request at that moment.
///
/// Send progress is watched once per flush, not once per write: the last write before each flush
/// is held back until the flush (or a close) and passed on with a promise (the writer's own, or
/// one made here), whose completion means every write of that flush has left, since a channel
/// completes writes in order. The writes before it pass straight on with whatever promise their
/// writer gave, so a response written as head, body and end costs one completion callback, not
/// three promises and three callbacks. The request handler of the same connection
/// tells it where a request stands by calling ``requestHeadReceived(expectsBody:)``,
/// ``requestEndReceived()`` and ``responseEndSent()`` directly (both live on the connection's event
/// loop), rather than sending events through the whole pipeline three times per request.
///
/// Time is read from `context.eventLoop.now`, so tests on an `EmbeddedChannel` drive it with
/// `advanceTime(by:)`.
final class ConnectionTimeoutHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    /// Whatever the codec above writes (it is passed on untouched; only its completion is watched).
    typealias OutboundIn = IOData
    typealias OutboundOut = ByteBuffer

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

    /// - Parameter minBodyRate: bytes per second a body must keep up with once `headTimeout` has
    ///   passed since its head; 0 for no minimum.
    init(headTimeout: TimeAmount, idleTimeout: TimeAmount, sendTimeout: TimeAmount, minBodyRate: Int = 0) {
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
        self.sendTimeout = sendTimeout
        self.machine = ConnectionTimeoutStateMachine(minBodyRate: minBodyRate, bodyGrace: headTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { perform(machine.connectionOpened(), context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimers()
        self.context = nil
        heldWrite.take()?.promise?.fail(ChannelError.ioOnClosedChannel)
    }

    func channelActive(context: ChannelHandlerContext) {
        perform(machine.connectionOpened(), context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        passHeldWrite(context: context)  // to fail as the channel fails any write now
        perform(machine.connectionClosed(), context: context)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(machine.bytesReceived(unwrapInboundIn(data).readableBytes, now: context.eventLoop.now), context: context)
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { perform(machine.becameWritable(), context: context) }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        passHeldWrite(context: context)
        heldWrite = (data, promise)
    }

    /// Passes the held write on with a promise, which reports the flush's completion to the state
    /// machine, then flushes.
    func flush(context: ChannelHandlerContext) {
        if let held = heldWrite.take() {
            let written = held.promise ?? context.eventLoop.makePromise()
            perform(machine.flushQueued(), context: context)
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            written.futureResult.whenComplete { _ in
                let (handler, context) = bound.value
                handler.perform(handler.machine.flushCompleted(), context: context)
            }
            context.write(held.data, promise: written)
        }
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        passHeldWrite(context: context)  // in order: what the handlers below do with unflushed writes at a close
        context.close(mode: mode, promise: promise)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        passHeldWrite(context: context)
        context.triggerUserOutboundEvent(event, promise: promise)
    }

    /// Passes the held write on as it is: no flush follows it (yet), so there is no flush to watch.
    private func passHeldWrite(context: ChannelHandlerContext) {
        guard let held = heldWrite.take() else { return }
        context.write(held.data, promise: held.promise)
    }

    // MARK: Progress reported by the request handler

    func requestHeadReceived(expectsBody: Bool) {
        guard let context else { return }
        perform(machine.requestHeadReceived(expectsBody: expectsBody, now: context.eventLoop.now), context: context)
    }

    func drainStarted() {
        guard let context else { return }
        perform(machine.drainStarted(), context: context)
    }

    func requestEndReceived() {
        guard let context else { return }
        perform(machine.requestEndReceived(), context: context)
    }

    func responseEndSent() {
        guard let context else { return }
        perform(machine.responseEndSent(), context: context)
    }

    private func perform(_ action: ConnectionTimeoutStateMachine.Action, context: ChannelHandlerContext) {
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
            let response = Problem.requestTimeout().rawResponse(requestID: RequestID.generate())
            let channel = context.channel
            let written = context.eventLoop.makePromise(of: Void.self)
            // Sent like any response, so a client that does not read it meets the send timeout.
            write(context: context, data: wrapOutboundOut(response), promise: written)
            flush(context: context)
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
        case .closeImmediately:
            stopTimers()
            // The TLS handler, if there is one, drops its close_notify; the close then ends the socket.
            context.triggerUserOutboundEvent(CloseImmediatelyEvent(), promise: nil)
            context.close(promise: nil)
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
}
