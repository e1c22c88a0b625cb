import NIOCore
import NIOHTTP2

/// Keeps a connection to `maxConcurrentStreams` open streams, refusing each one over it with
/// RST_STREAM (REFUSED_STREAM), which tells the client the request was not processed and may be
/// retried (RFC 9113 §5.1.2, §8.7).
///
/// NIO's handler enforces its SETTINGS_MAX_CONCURRENT_STREAMS as a connection error, so it is
/// given a higher limit (``nioLimit``) and the client is told the real one: ``HTTP2ConnectionGuard``
/// writes it into the SETTINGS frame NIO sends first. A client that keeps opening streams to be
/// refused is cut off like a rapid reset: more refusals than `maxResets` within the flood window
/// end the connection with GOAWAY (ENHANCE_YOUR_CALM).
///
/// One per connection, confined to its event loop: the stream initializer consults it as NIO
/// creates each stream, and each stream's close gives its place back.
final class HTTP2StreamAdmission {
    let limit: Int
    private var open = 0
    private var refusals: FloodCounter

    /// The limit NIO enforces: past it, a client that ignores the SETTINGS it acknowledged gets a
    /// connection error rather than one refused stream after another.
    static func nioLimit(for limit: Int) -> Int { limit + max(limit, 16) }

    init(limit: Int, maxRefusals: Int, floodWindow: TimeAmount) {
        self.limit = limit
        self.refusals = FloodCounter(limit: maxRefusals, window: floodWindow)
    }

    enum Decision {
        case admit
        case refuse
        /// Refused once too often: the connection ends.
        case goAway
    }

    /// A stream was created; admitted ones count until `released()`.
    func streamCreated(now: NIODeadline) -> Decision {
        guard open >= limit else {
            open += 1
            return .admit
        }
        return refusals.record(now) ? .refuse : .goAway
    }

    func released() { open -= 1 }

    /// Sent up the connection's pipeline when a client has been refused too often; the
    /// ``HTTP2ConnectionGuard`` ends the connection.
    struct TooManyRefusals {}
}

/// The only handler of a refused stream: resets it with REFUSED_STREAM as soon as it is active.
final class RefusedStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        refuse(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    private func refuse(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(.rstStream(.refusedStream)), promise: nil)
    }
}
