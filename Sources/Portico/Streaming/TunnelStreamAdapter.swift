import NIOCore
import NIOHTTP1

/// The client side of a WebSocket carried by an HTTP/2 stream (RFC 8441), as a relay sees a
/// connection: bytes in and out. It sits where the ``GatewayHandler`` was, above NIO's
/// HTTP/2-to-HTTP/1 codec (which cannot leave the stream's pipeline), so the tunnel's bytes are
/// the request's body and the response's:
///
/// - the client's DATA arrive as body parts, passed on as bytes; its END_STREAM (`.end`) is the
///   end of its direction, passed on as `ChannelEvent.inputClosed`, as a half-closed TCP
///   connection's would be;
/// - bytes written go out as body parts (DATA frames);
/// - a close ends the gateway's direction with END_STREAM (the codec's `.end`); the stream closes
///   once both directions have ended and the END_STREAM has left, or is reset after
///   ``lingerLimit`` if the client does not end its own: an orderly end is END_STREAM each way, a
///   reset is for failures (RFC 8441 §4).
final class TunnelStreamAdapter: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = HTTPServerResponsePart

    private var clientEnded = false
    private var gatewayEnded = false
    /// A close waiting for the client's END_STREAM.
    private var pendingClose: (promise: EventLoopPromise<Void>?, linger: Scheduled<Void>)?

    /// How long a closing stream waits for the client's END_STREAM before it is reset.
    static let lingerLimit = TimeAmount.seconds(5)

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            // Only one head per stream, and it has gone to the gateway handler already.
            break
        case .body(let bytes):
            context.fireChannelRead(wrapInboundOut(bytes))
        case .end:
            clientEnded = true
            // With the gateway's END_STREAM sent (or queued behind data the client's window
            // holds), NIO closes the stream once that has left; the linger bounds the wait.
            if pendingClose == nil { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !gatewayEnded else {
            promise?.fail(ChannelError.outputClosed)
            return
        }
        let bytes = unwrapOutboundIn(data)
        // The relay's empty write asks only to be told when what went before has left; the
        // END_STREAM that follows it (``close(context:mode:promise:)``) queues behind those
        // writes anyway, so no empty DATA frame is sent for it.
        guard bytes.readableBytes > 0 else {
            promise?.succeed()
            return
        }
        context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: promise)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, !gatewayEnded, context.channel.isActive else { return context.close(mode: mode, promise: promise) }
        gatewayEnded = true
        let channel = context.channel
        let ended = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        // However it goes, the stream is reset after the linger: a client that ended its side and
        // never opens its window would otherwise hold its END_STREAM, and the stream, for ever.
        pendingClose = (promise, context.eventLoop.scheduleTask(in: Self.lingerLimit) { channel.close(promise: nil) })
        if clientEnded {
            // Both sides ended: NIO closes the stream once the END_STREAM has left; closing it
            // before would reset it with the frame still queued.
            ended.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let pending = pendingClose {
            pendingClose = nil
            pending.linger.cancel()
            pending.promise?.succeed()
        }
        context.fireChannelInactive()
    }
}
