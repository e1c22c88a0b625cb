import NIOCore
import NIOHTTP2
import PorticoTLS

/// Closes an HTTP/2 connection that has had no open stream for `idleTimeout` (GOAWAY, NO_ERROR,
/// naming the last stream opened, then the close), and closes one NIO's handler has found a
/// connection error on (it sends the GOAWAY and reports the error, but leaves the close to its
/// user), counting it by reason.
///
/// It sits above NIO's HTTP/2 handler, whose stream events tell it when the connection is idle. An
/// idle connection is closed at once rather than through the two-step GOAWAY of a graceful
/// shutdown (``NIOHTTP2ServerConnectionManagementHandler``, next to it, does that one), which
/// waits for the client's PING acknowledgement: a client that vanished would never send it.
final class HTTP2IdleHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let idleTimeout: TimeAmount
    /// How long its GOAWAY may wait to be written before the close goes ahead regardless (a client
    /// that stopped reading would hold the connection for ever).
    private let sendTimeout: TimeAmount
    private let metrics: GatewayMetrics?
    private var openStreams = 0
    private var lastStream = HTTP2StreamID.rootStream
    private var idleTimer: Scheduled<Void>?

    init(idleTimeout: TimeAmount, sendTimeout: TimeAmount, metrics: GatewayMetrics?) {
        self.idleTimeout = idleTimeout
        self.sendTimeout = sendTimeout
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startIdleTimer(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        startIdleTimer(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let created as NIOHTTP2StreamCreatedEvent:
            openStreams += 1
            lastStream = max(lastStream, created.streamID)
            idleTimer?.cancel()
            idleTimer = nil
        case is StreamClosedEvent:
            openStreams -= 1
            if openStreams == 0 { startIdleTimer(context: context) }
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A stream's error has reset that stream only (NIO reports it wrapped); anything else has
        // ended the connection: NIO has written GOAWAY, which the close waits a loop tick for (the
        // flush that sends it follows this call).
        if !(error is NIOHTTP2Errors.StreamError) {
            // An HTTP/2 error of the client's is counted; an I/O or TLS error only closes.
            if let reason = Self.refusal(for: error) ?? (error is any NIOHTTP2Error ? .protocolError : nil) {
                metrics?.http2ConnectionRefused(reason)
            }
            let channel = context.channel
            context.eventLoop.execute { channel.close(promise: nil) }
        }
        context.fireErrorCaught(error)
    }

    private func startIdleTimer(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(in: idleTimeout) {
            let (handler, context) = bound.value
            handler.idleTimer = nil
            guard handler.openStreams == 0 else { return }
            let goAway = HTTP2Frame(
                streamID: .rootStream, payload: .goAway(lastStreamID: handler.lastStream, errorCode: .noError, opaqueData: nil))
            HTTP2IdleHandler.closeAfter(
                context.writeAndFlush(handler.wrapOutboundOut(goAway)), within: handler.sendTimeout, context: context)
        }
    }

    /// Closes once `written` (a GOAWAY) has left, or after `limit` if it does not, with the TLS
    /// close_notify dropped then: a client that stopped reading would otherwise hold the
    /// connection for ever.
    static func closeAfter(_ written: EventLoopFuture<Void>, within limit: TimeAmount, context: ChannelHandlerContext) {
        let channel = context.channel
        let deadline = context.eventLoop.scheduleTask(in: limit) {
            channel.triggerUserOutboundEvent(CloseImmediatelyEvent(), promise: nil)
            channel.close(promise: nil)
        }
        written.whenComplete { _ in
            deadline.cancel()
            channel.close(promise: nil)
        }
    }

    /// The reason a connection error of NIO's counts under; nil for errors that end no connection
    /// the client caused (a stream's own error, the channel closing).
    static func refusal(for error: any Error) -> GatewayMetrics.HTTP2Refusal? {
        switch error {
        case is NIOHTTP2Errors.ExcessiveRSTFrames: .resets
        case is NIOHTTP2Errors.ExcessiveControlFrames: .controlFrames
        case is NIOHTTP2Errors.ExcessiveEmptyDataFrames: .emptyData
        case is NIOHTTP2Errors.ExcessivelyLargeHeaderBlock, is NIOHTTP2Errors.ExcessiveContinuationFrames: .headerBlock
        case is NIOHTTP2Errors.ExcessiveStreamErrors, is NIOHTTP2Errors.ExcessiveNumberOfGlitches: .streamErrors
        case is NIOHTTP2Errors.BadClientMagic, is NIOHTTP2Errors.UnableToParseFrame: .protocolError
        default: nil
        }
    }
}
