import NIOCore
import NIOPosix
import PorticoTLS

/// One event loop's pipelined connection to Redis, with its reconnect backoff and its circuit
/// breaker. Confined to its loop: the request path reaches it without a lock or a thread hop.
///
/// With no connection, the first command starts one and waits with any that follow; the
/// handshake (``RedisConfiguration/handshake``) is written first and the waiting commands right
/// behind it, without waiting for its replies, so a new connection costs no extra round trip.
/// A failed attempt, or a connection closed after a timeout, starts the backoff, during which
/// commands fail at once.
///
/// `@unchecked Sendable`: the ``RedisClient`` (which is `Sendable`) holds one per event loop, and
/// every mutable field is touched only on ``eventLoop`` (``send(_:)`` and ``close()`` check it;
/// the callbacks run on it).
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
    /// Counts the connections made; the current one's number while connected.
    private var generation = 0
    /// The last connection closed by ``reset(_:because:)``.
    private var resetGeneration = 0
    /// Whether the backoff running was started by a timeout's reset; see ``send(_:bypassingBreaker:)``.
    private var backoffAfterTimeout = false

    /// A command sent and not yet answered, with its deadline, in the order sent.
    private struct Outstanding {
        let id: UInt64
        let promise: EventLoopPromise<RESPValue>
        let deadline: NIODeadline
        let generation: Int
    }
    private var outstanding = CircularBuffer<Outstanding>(initialCapacity: 16)
    private var nextCommandID: UInt64 = 0
    /// The timer for the oldest outstanding command's deadline; `nil` when none is armed.
    private var watchdog: Scheduled<Void>?

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

    /// Sends `command` (RESP bytes); the reply, or a ``RedisError``, within the configured timeout.
    /// Must be called on ``eventLoop``; the future completes there.
    ///
    /// An error reply (`-READONLY …`, `-LOADING …`) fails the future with
    /// ``RedisError/errorReply(_:)`` and counts as a failure for the breaker: Redis answered, but
    /// not usefully. A timeout closes the connection: a server that accepts bytes and never answers
    /// (frozen, blackholed) would otherwise hold it forever, and replies that may still come can no
    /// longer be trusted to match their commands. The next command reconnects once the backoff
    /// allows.
    func send(_ command: ByteBuffer, bypassingBreaker: Bool = false) -> EventLoopFuture<RESPValue> {
        eventLoop.preconditionInEventLoop()
        let start = clock()
        let before = breaker.state
        let allowed = bypassingBreaker || breaker.allow(now: start)
        if breaker.state != before { observer?.breakerChanged(from: before, to: breaker.state) }
        guard !shutDown else { return eventLoop.makeFailedFuture(RedisError.unavailable) }
        guard allowed else {
            observer?.failed(.circuitOpen)
            return eventLoop.makeFailedFuture(RedisError.circuitOpen)
        }
        // The backoff after a timeout, not over: fail at once, without counting it against the
        // breaker. The timeout was counted; counting each command that meets its backoff would open
        // the breaker on one slow reply under load. (After a refused or closed connection, or
        // `-READONLY`, the commands that fail at once do count: those conditions last.)
        if channel == nil, waiting == nil, backoffAfterTimeout, !backoff.mayAttempt(now: start) {
            observer?.failed(.unavailable)
            return eventLoop.makeFailedFuture(RedisError.unavailable)
        }
        let promise = eventLoop.makePromise(of: RESPValue.self)
        // The connection this command goes out on: the current one, or the one about to be made.
        let generation = channel == nil ? self.generation + 1 : self.generation
        nextCommandID &+= 1
        let id = nextCommandID
        let deadline = NIODeadline.now() + .nanoseconds(configuration.timeoutNanos)
        outstanding.append(Outstanding(id: id, promise: promise, deadline: deadline, generation: generation))
        if watchdog == nil { armWatchdog(at: deadline) }
        // One callback does the accounting and completes the caller's future: an error reply
        // becomes a failure there.
        let answer = eventLoop.makePromise(of: RESPValue.self)
        promise.futureResult.whenComplete { [self] reply in
            var result = reply
            if case .success(.error(let message)) = reply { result = .failure(RedisError.errorReply(message)) }
            defer { answer.completeWith(result) }
            forget(id)
            let before = breaker.state
            switch result {
            case .success:
                breaker.succeeded()
                backoff.connected()
                observer?.replied(afterNanos: clock() - start)
            case .failure(let error):
                let error = error as? RedisError ?? .connectionClosed
                // The commands a reset failed are one failure, already counted (the timeout that
                // caused it); counting each would open the breaker on one slow reply under load.
                if error != .connectionClosed || generation > resetGeneration { breaker.failed(now: clock()) }
                observer?.failed(error)
                // A node that became a replica (a failover) will not take writes on this
                // connection again; a new one may reach the new primary (a name that moved).
                if error.errorCode == "READONLY" { reset(generation, because: error) }
            }
            if breaker.state != before { observer?.breakerChanged(from: before, to: breaker.state) }
        }
        dispatch(RedisCommand(encoded: command, promise: promise))
        return answer.futureResult
    }

    /// Stops watching command `id`'s deadline. Replies come in order, so it is nearly always the
    /// oldest.
    private func forget(_ id: UInt64) {
        if outstanding.first?.id == id {
            outstanding.removeFirst()
        } else if let index = outstanding.firstIndex(where: { $0.id == id }) {
            outstanding.remove(at: index)
        }
    }

    /// One timer for the oldest outstanding command's deadline, rather than a scheduled task per
    /// command (their scheduling and cancelling was a measurable part of a fleet request's cost).
    private func armWatchdog(at deadline: NIODeadline) {
        watchdog = eventLoop.scheduleTask(deadline: deadline) { [self] in
            watchdog = nil
            expireOverdue()
        }
    }

    /// Fails the commands whose deadline has passed, oldest first: a timeout, which closes their
    /// connection (``reset(_:because:)``); a command on a connection already reset was failed by
    /// its closing, or is failed here as closed (not counted again). Then watches the next one.
    private func expireOverdue() {
        let now = NIODeadline.now()
        while let oldest = outstanding.first, oldest.deadline <= now {
            outstanding.removeFirst()
            // A promise completed twice keeps its first result, so a reply racing the timeout is
            // harmless either way.
            if oldest.generation <= resetGeneration {
                oldest.promise.fail(RedisError.connectionClosed)
            } else {
                oldest.promise.fail(RedisError.timeout)
                reset(oldest.generation, because: .timeout)
            }
        }
        if let next = outstanding.first { armWatchdog(at: next.deadline) }
    }

    /// Closes connection `generation` if it is still the current one, failing every command
    /// waiting on it, and starts the backoff before the next attempt.
    private func reset(_ generation: Int, because reason: RedisError) {
        guard generation == self.generation, let channel else { return }
        self.channel = nil
        resetGeneration = generation
        backoff.attemptFailed(now: clock())
        backoffAfterTimeout = reason == .timeout
        observer?.disconnected(reason)
        channel.close(promise: nil)
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
        let tls = configuration.tls
        let maxReply = configuration.maxReplyBytes
        ClientBootstrap(group: eventLoop)
            .connectTimeout(.nanoseconds(configuration.timeoutNanos))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // TLS first, nearest the socket: the commands written at once wait in it
                    // until the handshake is done.
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(TLSClientHandler(context: tls.context, serverName: tls.serverName))
                    }
                    try channel.pipeline.syncOperations.addHandlers(
                        ByteToMessageHandler(
                            RESPValueDecoder(maxBulkLength: maxReply, maxBufferedBytes: 2 * maxReply)),
                        RedisCommandHandler())
                }
            }
            .connect(host: configuration.host, port: configuration.port)
            .whenComplete { [self] result in
                let commands = waiting ?? []
                waiting = nil
                switch result {
                case .success(let channel) where !shutDown:
                    // The backoff is reset by the first reply, not here: a frozen Redis still
                    // accepts connections (the kernel does), and would be reconnected to at once
                    // after every timeout.
                    generation += 1
                    self.channel = channel
                    observer?.connected()
                    channel.closeFuture.whenComplete { [self] _ in
                        // Closed by the server, or by a failed TLS handshake or a refused
                        // handshake command: the next connection waits for the backoff too.
                        if self.channel === channel {
                            self.channel = nil
                            backoff.attemptFailed(now: clock())
                            backoffAfterTimeout = false
                        }
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
                    backoffAfterTimeout = false
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
        watchdog?.cancel()
        watchdog = nil
        while let command = outstanding.popFirst() { command.promise.fail(RedisError.unavailable) }
    }
}
