import NIOCore

/// Enforces the head/body read timeout and the keep-alive idle timeout on one connection.
///
/// It sits directly above the socket (and, once TLS lands, above the TLS handler) so it sees every
/// inbound byte; its 408 answer is written as raw bytes because the HTTP codec may hold a
/// half-parsed request at that moment. The request handler of the same connection tells it where a
/// request stands by calling ``requestHeadReceived(expectsBody:)``, ``requestEndReceived()`` and
/// ``responseEndSent()`` directly (both live on the connection's event loop), rather than sending
/// events through the whole pipeline three times per request.
final class ConnectionTimeoutHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var machine = ConnectionTimeoutStateMachine()
    private var timer: Scheduled<Void>?
    /// When the scheduled timer task runs; `nil` when none is scheduled.
    private var wakeUp: NIODeadline?
    /// When the state machine's current timer expires; `nil` when it wants none.
    private var deadline: NIODeadline?
    private var context: ChannelHandlerContext?
    private let headTimeout: TimeAmount
    private let idleTimeout: TimeAmount

    init(headTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { perform(machine.connectionOpened(), context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimer()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        perform(machine.connectionOpened(), context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(machine.connectionClosed(), context: context)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(machine.bytesReceived(), context: context)
        context.fireChannelRead(data)
    }

    // MARK: Progress reported by the request handler

    func requestHeadReceived(expectsBody: Bool) {
        guard let context else { return }
        perform(machine.requestHeadReceived(expectsBody: expectsBody), context: context)
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
            deadline = nil
        case .startTimer(let kind):
            let now = NIODeadline.now()
            let newDeadline = now + (kind == .idle ? idleTimeout : headTimeout)
            deadline = newDeadline
            if let wakeUp, wakeUp <= newDeadline { return }  // the pending wake-up comes first; it re-arms
            scheduleWakeUp(at: min(newDeadline, now + granularity), context: context)
        case .close:
            stopTimer()
            context.close(promise: nil)
        case .respondTimeoutAndClose:
            stopTimer()
            let response = Problem.requestTimeout().rawResponse(requestID: RequestID.generate())
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(response)).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    // MARK: The timer
    //
    // Deadlines move on every request (first byte, head, response end), but the timer task does not:
    // it wakes at most every `granularity` (the shorter of the two timeouts), compares the clock with
    // the current deadline and either fires the state machine or sleeps again. Moving a deadline is
    // then an assignment, not a cancel and a schedule on the event loop's timer heap, and since a
    // wake-up is never further away than the shortest timeout, no deadline is ever missed.

    private var granularity: TimeAmount { min(headTimeout, idleTimeout) }

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
        guard let deadline else { return }  // no timer wanted now; the next deadline schedules anew
        let now = NIODeadline.now()
        if now >= deadline {
            self.deadline = nil
            perform(machine.timerFired(), context: context)
        } else {
            scheduleWakeUp(at: min(deadline, now + granularity), context: context)
        }
    }

    private func stopTimer() {
        timer?.cancel()
        timer = nil
        wakeUp = nil
        deadline = nil
    }
}
