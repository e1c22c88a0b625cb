import NIOCore

/// Counts the reads that reach it on their way to the socket: put below a handler to see whether
/// that handler lets a read through (back-pressure, auto-read off).
public final class ReadCounter: ChannelOutboundHandler {
    public typealias OutboundIn = Any
    public private(set) var reads = 0

    public init() {}

    public func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}
