import NIOCore

/// A Redis client with one pipelined connection per event loop: a request's command goes out on
/// its own connection's loop and its reply completes there, so the request path takes no lock and
/// makes no thread hop. Each loop's connection has its own breaker and backoff.
public final class RedisClient: Sendable {
    private let connections: [ObjectIdentifier: RedisLoopConnection]
    public let configuration: RedisConfiguration

    /// - Parameters:
    ///   - group: the event loops commands will be sent from; connections are made lazily.
    ///   - clock: monotonic nanoseconds, for the breaker and backoff (tests may pass their own).
    public init(
        group: any EventLoopGroup, configuration: RedisConfiguration, observer: (any RedisObserver)? = nil,
        clock: @escaping @Sendable () -> Int64 = { Int64(bitPattern: NIODeadline.now().uptimeNanoseconds) }
    ) {
        self.configuration = configuration
        var connections: [ObjectIdentifier: RedisLoopConnection] = [:]
        for loop in group.makeIterator() {
            connections[ObjectIdentifier(loop)] = RedisLoopConnection(
                eventLoop: loop, configuration: configuration, observer: observer, clock: clock)
        }
        self.connections = connections
    }

    /// Sends `command` from `eventLoop` (the caller's, which it must be on) and completes there.
    /// A loop outside the group the client was made with gets ``RedisError/unavailable``.
    ///
    /// - Parameter bypassingBreaker: send even if the breaker would refuse, for a command that
    ///   answers a reply Redis has just given (`-NOSCRIPT`'s retry with the script whole): Redis is
    ///   answering, and refusing the retry would leave a half-open breaker reopened by every probe.
    ///   Its outcome still counts.
    public func send(_ command: RESPValue, on eventLoop: any EventLoop, bypassingBreaker: Bool = false) -> EventLoopFuture<RESPValue> {
        var bytes = ByteBuffer()
        RESPValueEncoder.write(command, to: &bytes)
        return send(encoded: bytes, on: eventLoop, bypassingBreaker: bypassingBreaker)
    }

    /// Sends a command already in RESP bytes (``RESPValueEncoder/command(_:)``): the request
    /// path's way, which skips building a ``RESPValue`` per argument.
    public func send(encoded command: ByteBuffer, on eventLoop: any EventLoop, bypassingBreaker: Bool = false) -> EventLoopFuture<RESPValue>
    {
        guard let connection = connections[ObjectIdentifier(eventLoop)] else {
            return eventLoop.makeFailedFuture(RedisError.unavailable)
        }
        return connection.send(command, bypassingBreaker: bypassingBreaker)
    }

    /// Each loop's breaker state, read on its loop.
    public func breakerStates() -> EventLoopFuture<[CircuitBreaker.State]> {
        let futures = connections.values.map { connection in
            connection.eventLoop.submit { connection.breakerState }
        }
        guard let first = futures.first else { fatalError("a Redis client has at least one event loop") }
        return EventLoopFuture.whenAllSucceed(futures, on: first.eventLoop)
    }

    /// Closes every connection.
    public func close() -> EventLoopFuture<Void> {
        let futures = connections.values.map { connection in connection.eventLoop.submit { connection.close() } }
        guard let first = futures.first else { fatalError("a Redis client has at least one event loop") }
        return EventLoopFuture.andAllSucceed(futures, on: first.eventLoop)
    }
}
