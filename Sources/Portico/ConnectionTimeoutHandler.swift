import NIOCore

/// Events the request handler sends down the pipeline so the timeout handler (which sits below the
/// HTTP codec and sees only bytes) knows where a request stands.
enum RequestProgressEvent: Sendable {
    case headReceived(expectsBody: Bool)
    case endReceived
    case responseEndSent
}

/// Enforces the head/body read timeout and the keep-alive idle timeout on one connection.
///
/// It sits directly above the socket (and, once TLS lands, above the TLS handler) so it sees every
/// inbound byte; its 408 answer is written as raw bytes because the HTTP codec may hold a
/// half-parsed request at that moment.
final class ConnectionTimeoutHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var machine = ConnectionTimeoutStateMachine()
    private var timer: Scheduled<Void>?
    private let headTimeout: TimeAmount
    private let idleTimeout: TimeAmount

    init(headTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { perform(machine.connectionOpened(), context: context) }
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

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let progress = event as? RequestProgressEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch progress {
        case .headReceived(let expectsBody): perform(machine.requestHeadReceived(expectsBody: expectsBody), context: context)
        case .endReceived: perform(machine.requestEndReceived(), context: context)
        case .responseEndSent: perform(machine.responseEndSent(), context: context)
        }
        promise?.succeed()
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
