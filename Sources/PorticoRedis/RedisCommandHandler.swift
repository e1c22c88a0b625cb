import NIOCore
import PorticoTLS

/// A command on its way to Redis, in RESP bytes, with the promise its reply completes.
public struct RedisCommand: Sendable {
    public let bytes: ByteBuffer
    public let promise: EventLoopPromise<RESPValue>

    /// `value` encoded (``RESPValueEncoder/write(_:to:)``).
    public init(_ value: RESPValue, promise: EventLoopPromise<RESPValue>) {
        var bytes = ByteBuffer()
        RESPValueEncoder.write(value, to: &bytes)
        self.init(encoded: bytes, promise: promise)
    }

    /// A command already in RESP bytes (``RESPValueEncoder/command(_:)``).
    public init(encoded bytes: ByteBuffer, promise: EventLoopPromise<RESPValue>) {
        self.bytes = bytes
        self.promise = promise
    }
}

/// Matches replies to commands on one pipelined connection: Redis answers in order, so the
/// promises wait in a queue and each reply completes the oldest. Error replies (`-ERR …`) complete
/// their promise successfully, as ``RESPValue/error(_:)``: they are answers, and the connection
/// stays in step.
///
/// When the connection closes, its bytes stop being RESP2, or its TLS fails, every waiting promise
/// fails (``RedisError/connectionClosed``, ``RedisError/protocolViolation(_:)``,
/// ``RedisError/tls(_:)``) and the channel closes.
public final class RedisCommandHandler: ChannelDuplexHandler {
    public typealias InboundIn = RESPValue
    public typealias OutboundIn = RedisCommand
    public typealias OutboundOut = ByteBuffer

    private var waiting = CircularBuffer<EventLoopPromise<RESPValue>>(initialCapacity: 16)

    public init() {}

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let command = unwrapOutboundIn(data)
        waiting.append(command.promise)
        context.write(wrapOutboundOut(command.bytes), promise: promise)
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let reply = unwrapInboundIn(data)
        guard let promise = waiting.popFirst() else {
            // A reply nobody asked for: the stream is out of step.
            failAll(.protocolViolation("a reply arrived with no command waiting"))
            context.close(promise: nil)
            return
        }
        promise.succeed(reply)
    }

    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case is RESPDecodingError: failAll(.protocolViolation("\(error)"))
        case is TLSError: failAll(.tls("\(error)"))
        default: failAll(.connectionClosed)
        }
        context.close(promise: nil)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        failAll(.connectionClosed)
        context.fireChannelInactive()
    }

    private func failAll(_ error: RedisError) {
        while let promise = waiting.popFirst() { promise.fail(error) }
    }
}
