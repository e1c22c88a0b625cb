import NIOCore
import NIOPosix

/// One event loop's pipelined connection to Redis, with its reconnect backoff and its circuit
/// breaker. Confined to its loop: the request path reaches it without a lock or a thread hop.
///
/// With no connection, the first command starts one and waits with any that follow; the
/// handshake (``RedisConfiguration/handshake``) is written first and the waiting commands right
/// behind it, without waiting for its replies, so a new connection costs no extra round trip.
/// A failed attempt starts the backoff, during which commands fail at once.
final class RedisLoopConnection: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let configuration: RedisConfiguration
    private let observer: (any RedisObserver)?
    private let clock: @Sendable () -> Int64
    private var channel: (any Channel)?
    /// Commands waiting for the connection being made; `nil` when none is being made.
    private var waiting: [RedisCommand]?
    private var backoff = ReconnectBackoff()
    private var breaker: CircuitBreaker
    private var shutDown = false
    private var flushScheduled = false

    init(
        eventLoop: any EventLoop, configuration: RedisConfiguration, observer: (any RedisObserver)?,
        clock: @escaping @Sendable () -> Int64
    ) {
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.observer = observer
        self.clock = clock
        breaker = CircuitBreaker(failureThreshold: configuration.breakerFailures, openNanos: configuration.breakerOpenNanos)
    }

    var breakerState: CircuitBreaker.State { breaker.state }

    /// Sends `value`; the reply, or a ``RedisError``, within the configured timeout. Must be called
    /// on ``eventLoop``; the future completes there.
    func send(_ value: RESPValue) -> EventLoopFuture<RESPValue> {
        eventLoop.preconditionInEventLoop()
        let start = clock()
        let before = breaker.state
        let allowed = breaker.allow(now: start)
        if breaker.state != before { observer?.breakerChanged(from: before, to: breaker.state) }
        guard !shutDown else { return eventLoop.makeFailedFuture(RedisError.unavailable) }
        guard allowed else {
            observer?.failed(.circuitOpen)
            return eventLoop.makeFailedFuture(RedisError.circuitOpen)
        }
        let promise = eventLoop.makePromise(of: RESPValue.self)
        // A promise completed twice keeps its first result: a reply after the timeout is dropped,
        // and the connection stays in step (its handler still matches that reply to this
        // command). It is not closed: Redis answers in order, so a new connection would wait
        // behind the same slow server, and closing would fail every other command in flight.
        let timeout = eventLoop.scheduleTask(in: .nanoseconds(configuration.timeoutNanos)) {
            promise.fail(RedisError.timeout)
        }
        let future = promise.futureResult
        future.whenComplete { [self] result in
            timeout.cancel()
            let before = breaker.state
            switch result {
            case .success:
                breaker.succeeded()
                observer?.replied(afterNanos: clock() - start)
            case .failure(let error):
                breaker.failed(now: clock())
                observer?.failed(error as? RedisError ?? .connectionClosed)
            }
            if breaker.state != before { observer?.breakerChanged(from: before, to: breaker.state) }
        }
        dispatch(RedisCommand(value, promise: promise))
        return future
    }

    private func dispatch(_ command: RedisCommand) {
        if let channel {
            channel.write(command, promise: nil)
            // One flush (one write system call) for every command written in this turn of the
            // event loop: the requests of one read batch go out together.
            if !flushScheduled {
                flushScheduled = true
                eventLoop.execute { [self] in
                    flushScheduled = false
                    self.channel?.flush()
                }
            }
        } else if waiting != nil {
            waiting!.append(command)
        } else if backoff.mayAttempt(now: clock()) {
            waiting = [command]
            connect()
        } else {
            command.promise.fail(RedisError.unavailable)
        }
    }

    private func connect() {
        let handshake = configuration.handshake
        ClientBootstrap(group: eventLoop)
            .connectTimeout(.nanoseconds(configuration.timeoutNanos))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers(
                        ByteToMessageHandler(RESPValueDecoder()), MessageToByteHandler(RESPValueEncoder()), RedisCommandHandler())
                }
            }
            .connect(host: configuration.host, port: configuration.port)
            .whenComplete { [self] result in
                let commands = waiting ?? []
                waiting = nil
                switch result {
                case .success(let channel) where !shutDown:
                    backoff.connected()
                    self.channel = channel
                    channel.closeFuture.whenComplete { [self] _ in
                        if self.channel === channel { self.channel = nil }
                    }
                    for command in handshake {
                        let reply = eventLoop.makePromise(of: RESPValue.self)
                        // A refused handshake (wrong password, unknown database) closes the
                        // connection: the commands behind it would only fail one by one.
                        reply.futureResult.whenSuccess { if case .error = $0 { channel.close(promise: nil) } }
                        channel.write(RedisCommand(command, promise: reply), promise: nil)
                    }
                    for command in commands { channel.write(command, promise: nil) }
                    channel.flush()
                case .success(let channel):
                    channel.close(promise: nil)
                    for command in commands { command.promise.fail(RedisError.connectionClosed) }
                case .failure:
                    backoff.attemptFailed(now: clock())
                    for command in commands { command.promise.fail(RedisError.unavailable) }
                }
            }
    }

    /// Closes the connection; later commands fail.
    func close() {
        eventLoop.preconditionInEventLoop()
        shutDown = true
        channel?.close(promise: nil)
        channel = nil
    }
}
