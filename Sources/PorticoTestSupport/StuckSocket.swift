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
    /// The held writes, in order, each with the bytes it carries.
    public private(set) var held: [(data: NIOAny, promise: EventLoopPromise<Void>?, bytes: Int)] = []
    /// Writes that reached this socket with a promise, held or not.
    public private(set) var promisedWrites = 0
    /// User outbound events that reached the socket (unhandled by the handlers above).
    public private(set) var events: [Any] = []
    public private(set) var closeRequests = 0
    private var context: ChannelHandlerContext?

    public init() {}

    public var immediateCloseRequested: Bool { events.contains { $0 is CloseImmediatelyEvent } }

    /// What the held writes carry: the bytes a socket would count as unwritten.
    public var heldBytes: Int { held.reduce(0) { $0 + $1.bytes } }

    public func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if promise != nil { promisedWrites += 1 }
        if stuck {
            held.append((data, promise, Self.size(of: unwrapOutboundIn(data))))
        } else {
            context.write(data, promise: promise)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        if !stuck { context.flush() }
    }

    /// Lets the first `count` held writes that carry bytes through, with the empty ones among
    /// and right after them (a write of nothing is no progress of its own), and completes them.
    public func release(_ count: Int = .max) {
        guard let context else { return }
        var released = 0
        var taken = 0
        while taken < held.count, released < count || held[taken].bytes == 0 {
            if held[taken].bytes > 0 { released += 1 }
            taken += 1
        }
        let writes = held.prefix(taken)
        held.removeFirst(taken)
        for write in writes { context.write(write.data, promise: write.promise) }
        context.flush()
    }

    private static func size(of write: Any) -> Int {
        switch write {
        case let buffer as ByteBuffer: buffer.readableBytes
        case let data as IOData: data.readableBytes
        default: 1
        }
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
