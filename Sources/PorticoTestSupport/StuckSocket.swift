import NIOCore
import PorticoTLS

/// Stands for the socket at the bottom of an `EmbeddedChannel`'s pipeline, for tests of what
/// happens when a peer stops reading.
///
/// `EmbeddedChannel` completes every write at its flush, as if the peer read everything at once.
/// While ``stuck``, this handler holds writes instead, with their promises, as a socket whose
/// peer's window is closed would; ``release(_:)`` lets some through (the peer read a little).
/// A close fails what it held, as closing a socket does.
public final class StuckSocket: ChannelOutboundHandler {
    public typealias OutboundIn = Any

    public var stuck = false
    public private(set) var held: [(data: NIOAny, promise: EventLoopPromise<Void>?)] = []
    /// User outbound events that reached the socket (unhandled by the handlers above).
    public private(set) var events: [Any] = []
    public private(set) var closeRequests = 0
    private var context: ChannelHandlerContext?

    public init() {}

    public var immediateCloseRequested: Bool { events.contains { $0 is CloseImmediatelyEvent } }

    public func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if stuck {
            held.append((data, promise))
        } else {
            context.write(data, promise: promise)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        if !stuck { context.flush() }
    }

    /// Lets the first `count` held writes through and completes them.
    public func release(_ count: Int = .max) {
        guard let context else { return }
        let released = held.prefix(count)
        held.removeFirst(released.count)
        for write in released { context.write(write.data, promise: write.promise) }
        context.flush()
    }

    public func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        events.append(event)
        context.triggerUserOutboundEvent(event, promise: promise)
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        closeRequests += 1
        let dropped = held
        held.removeAll()
        context.close(mode: mode, promise: promise)
        for write in dropped { write.promise?.fail(ChannelError.ioOnClosedChannel) }
    }
}
