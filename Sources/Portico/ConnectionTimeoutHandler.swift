import NIOCore

/// Enforces the head/body read timeout and the keep-alive idle timeout on one connection.
///
/// It sits directly above the socket (and, once TLS lands, above the TLS handler) so it sees every
/// inbound byte; its 408 answer is written as raw bytes because the HTTP codec may hold a
/// half-parsed request at that moment. The request handler of the same connection tells it where a
/// request stands by calling ``requestHeadReceived(expectsBody:)``, ``requestEndReceived()`` and
/// ``responseEndSent()`` directly (both live on the connection's event loop), rather than sending
/// events through the whole pipeline three times per request.
final class ConnectionTimeoutHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var machine = ConnectionTimeoutStateMachine()
    private var timer: Scheduled<Void>?
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
        timer?.cancel()
        timer = nil
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
            timer?.cancel()
            timer = nil
        case .startTimer(let kind):
            timer?.cancel()
            let delay = kind == .idle ? idleTimeout : headTimeout
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: delay) {
                let (handler, context) = bound.value
                handler.timer = nil
                handler.perform(handler.machine.timerFired(), context: context)
            }
        case .close:
            context.close(promise: nil)
        case .respondTimeoutAndClose:
            let response = Problem.requestTimeout().rawResponse(requestID: RequestID.generate())
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(response)).whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
