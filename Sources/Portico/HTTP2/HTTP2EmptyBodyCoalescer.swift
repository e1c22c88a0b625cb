import NIOCore
import NIOHTTP2

/// Sends a response with no body as one HEADERS frame that ends the stream, where NIO's
/// HTTP/2-to-HTTP/1 codec would send HEADERS and then an empty DATA frame to end it: one frame
/// less for every 204, 304, HEAD answer or empty body, and the form gRPC's Trailers-Only answers
/// must take (a gRPC client reads its status from the one HEADERS frame).
///
/// It holds a HEADERS frame that does not end the stream until the next write or flush: empty
/// DATA frames are folded in (an END_STREAM one ends the held HEADERS), anything else lets the
/// HEADERS go first, unchanged.
final class HTTP2EmptyBodyCoalescer: ChannelOutboundHandler {
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private var held: (headers: HTTP2Frame.FramePayload.Headers, promises: [EventLoopPromise<Void>])?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let payload = unwrapOutboundIn(data)
        switch payload {
        case .headers(let headers) where !headers.endStream && held == nil:
            held = (headers, promise.map { [$0] } ?? [])
        case .data(let data) where held != nil && data.data.readableBytes == 0:
            if let promise { held!.promises.append(promise) }
            if data.endStream {
                held!.headers.endStream = true
                release(context: context)
            }
        default:
            release(context: context)
            context.write(data, promise: promise)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // Torn down with HEADERS still held: their writers are told they were not written.
        guard let (_, promises) = held else { return }
        held = nil
        for promise in promises { promise.fail(ChannelError.ioOnClosedChannel) }
    }

    func flush(context: ChannelHandlerContext) {
        release(context: context)
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        release(context: context)
        context.close(mode: mode, promise: promise)
    }

    private func release(context: ChannelHandlerContext) {
        guard let (headers, promises) = held else { return }
        held = nil
        let written = promises.isEmpty ? nil : context.eventLoop.makePromise(of: Void.self)
        if let written { for promise in promises { written.futureResult.cascade(to: promise) } }
        context.write(wrapOutboundOut(.headers(headers)), promise: written)
    }
}
