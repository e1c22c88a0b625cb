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
/// creates each stream, and its ``Delegate`` gives a stream's place back as soon as NIO closes the
/// stream, before the next frame of the same read (a stream channel's close completes a loop tick
/// later, and NIO's `StreamClosedEvent` reaches the pipeline after the read: a client that resets a
/// stream and opens another in one write would otherwise be refused).
final class HTTP2StreamAdmission {
    let limit: Int
    /// The streams admitted and not closed yet.
    private var admitted = Set<HTTP2StreamID>()
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

    /// A stream was created; an admitted one counts until ``streamClosed(_:)``.
    func streamCreated(_ id: HTTP2StreamID?, now: NIODeadline) -> Decision {
        guard let id, admitted.count >= limit else {
            if let id { admitted.insert(id) }
            return .admit
        }
        return refusals.record(now) ? .refuse : .goAway
    }

    /// A stream closed; its place is free if it had one.
    func streamClosed(_ id: HTTP2StreamID) {
        admitted.remove(id)
    }

    /// NIO's stream delegate for the connection: frees a closed stream's place, then tells the
    /// connection management handler, whose delegate it stands in front of (NIO takes one).
    struct Delegate: NIOHTTP2StreamDelegate {
        let admission: NIOLoopBound<HTTP2StreamAdmission>
        let next: NIOHTTP2ServerConnectionManagementHandler.HTTP2StreamDelegate

        func streamCreated(_ id: HTTP2StreamID, channel: any Channel) {
            next.streamCreated(id, channel: channel)
        }

        func streamClosed(_ id: HTTP2StreamID, channel: any Channel) {
            admission.value.streamClosed(id)
            next.streamClosed(id, channel: channel)
        }
    }

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
