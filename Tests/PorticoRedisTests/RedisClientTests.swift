import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PorticoRedisTesting
import Testing

@testable import PorticoRedis

/// The client against a real `redis-server`.
@Suite("Redis client", .enabled(if: RedisServerProcess.isInstalled), .serialized)
struct RedisClientTests {
    private func withClient(
        _ server: RedisServerProcess, observer: (any RedisObserver)? = nil, configure: (inout RedisConfiguration) -> Void = { _ in },
        _ body: (RedisClient, any EventLoop) throws -> Void
    ) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        var configuration = RedisConfiguration(host: "127.0.0.1", port: server.port, timeoutNanos: 2_000_000_000)
        configure(&configuration)
        let client = RedisClient(group: group, configuration: configuration, observer: observer)
        defer { try? client.close().wait() }
        try body(client, group.next())
    }

    /// Sends `command` `count` times, one after another, each expected to fail; their errors, in
    /// order. An answer is recorded as an issue (`ifAnswered` says what it would mean).
    private static func failures(
        of command: [String], count: Int, client: RedisClient, on loop: any EventLoop, ifAnswered: Comment
    ) throws -> [RedisError] {
        var failures: [RedisError] = []
        for _ in 0..<count {
            do {
                _ = try loop.flatSubmit { client.send(.command(command), on: loop) }.wait()
                Issue.record(ifAnswered)
            } catch let error as RedisError {
                failures.append(error)
            }
        }
        return failures
    }

    @Test("pipelined commands get their own replies, in order")
    func pipelined() throws {
        let server = try RedisServerProcess()
        try withClient(server) { client, loop in
            let futures = try loop.submit {
                (0..<200).map { index in
                    client.send(.command(["SET", "k\(index)", "v\(index)"]), on: loop).flatMap { _ in
                        client.send(.command(["GET", "k\(index)"]), on: loop)
                    }
                }
            }.wait()
            for (index, future) in futures.enumerated() {
                let value = try future.wait()
                #expect(value.string == "v\(index)")
            }
            let incremented = try loop.flatSubmit { client.send(.command(["INCRBY", "n", "-7"]), on: loop) }.wait()
            #expect(incremented == .integer(-7))
            let missing = try loop.flatSubmit { client.send(.command(["GET", "missing"]), on: loop) }.wait()
            #expect(missing == .bulkString(nil))
            do {
                let reply = try loop.flatSubmit { client.send(.command(["NOSUCHCOMMAND"]), on: loop) }.wait()
                Issue.record("expected an error reply, got \(reply)")
            } catch let error as RedisError {
                #expect(error.errorCode == "ERR", "\(error)")
            }
            // The error reply kept the connection in step.
            let after = try loop.flatSubmit { client.send(.command(["ECHO", "after"]), on: loop) }.wait()
            #expect(after.string == "after")
        }
    }

    @Test("the handshake selects the database and loads the scripts")
    func handshake() throws {
        let server = try RedisServerProcess()
        try withClient(
            server,
            configure: {
                $0.database = 3; $0.scripts = ["return 41 + 1"]
            }
        ) { client, loop in
            let set = try loop.flatSubmit { client.send(.command(["SET", "where", "three"]), on: loop) }.wait()
            #expect(set == .simpleString("OK"))
            // The script was loaded: the server knows it by its SHA-1.
            let exists = try loop.flatSubmit {
                client.send(.command(["SCRIPT", "EXISTS", "33edbe77b397182f056bf8fa1fed8a528593e4a5"]), on: loop)
            }.wait()
            #expect(exists == .array([.integer(1)]))
        }
        let inThree = try server.command(["EVAL", "redis.call('SELECT', 3) return redis.call('GET', 'where')", "0"])
        #expect(inThree.string == "three")
        let inZero = try server.command(["GET", "where"])
        #expect(inZero == .bulkString(nil), "not in database 0")
    }

    @Test("a dead Redis fails commands, the backoff and breaker fail them at once, and a restarted one is used again")
    func deadAndBack() throws {
        let server = try RedisServerProcess()
        try withClient(
            server,
            configure: {
                $0.timeoutNanos = 200_000_000; $0.breakerOpenNanos = 100_000_000
            }
        ) { client, loop in
            let pong = try loop.flatSubmit { client.send(.command(["PING"]), on: loop) }.wait()
            #expect(pong == .simpleString("PONG"))
            server.stop()
            let failures = try Self.failures(of: ["PING"], count: 8, client: client, on: loop, ifAnswered: "a dead Redis answered")
            #expect(failures.count == 8)
            #expect(failures.contains(.circuitOpen), "the breaker opened: \(failures)")
            try server.start()
            // Recovery: the breaker half-opens after its open time, the backoff allows a new
            // connection, and a reply closes the breaker. Bounded: ten seconds.
            var recovered = false
            for _ in 0..<500 where !recovered {
                recovered = (try? loop.flatSubmit { client.send(.command(["PING"]), on: loop) }.wait()) == .simpleString("PONG")
                if !recovered { try loop.scheduleTask(in: .milliseconds(20)) {}.futureResult.wait() }
            }
            #expect(recovered)
            let states = try client.breakerStates().wait()
            #expect(states == [.closed])
        }
    }

    @Test("a slow reply times out and closes its connection; the commands behind it fail, and a new connection answers in step")
    func timeout() throws {
        let server = try RedisServerProcess()
        let events = EventRecorder()
        try withClient(server, observer: events, configure: { $0.timeoutNanos = 100_000_000 }) { client, loop in
            let (slow, next) = try loop.submit {
                (
                    client.send(.command(["DEBUG", "SLEEP", "0.3"]), on: loop),
                    client.send(.command(["ECHO", "behind"]), on: loop)
                )
            }.wait()
            #expect(throws: RedisError.timeout) { try slow.wait() }
            // Failed by the close that the first timeout caused, or by its own timeout.
            #expect(throws: RedisError.self) { try next.wait() }
            var answered: RESPValue?
            for attempt in 0..<200 where answered == nil {
                let reply = try? loop.flatSubmit { client.send(.command(["ECHO", "fresh \(attempt)"]), on: loop) }.wait()
                if let reply {
                    answered = reply
                    #expect(reply.string == "fresh \(attempt)")
                } else {
                    try loop.scheduleTask(in: .milliseconds(20)) {}.futureResult.wait()
                }
            }
            #expect(answered != nil)
            let seen = events.events
            // connected, the timeout, the reset it caused, and a later connection that answered.
            let timedOut = seen.firstIndex(of: "failed timeout")
            let reset = seen.firstIndex(of: "disconnected timeout")
            let reconnected = seen.lastIndex(of: "connected")
            #expect(seen.first == "connected", "\(seen)")
            #expect(timedOut != nil && reset != nil && reconnected != nil, "\(seen)")
            if let timedOut, let reset, let reconnected {
                #expect(timedOut < reset && reset < reconnected, "\(seen)")
                #expect(seen[reconnected...].contains("replied"), "\(seen)")
            }
        }
    }

    @Test("a server that accepts and never answers is left: the timeout closes the connection and the next command reconnects")
    func blackhole() async throws {
        let hole = try await Blackhole.start()
        let events = EventRecorder()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = RedisClient(
            group: group, configuration: RedisConfiguration(host: "127.0.0.1", port: hole.port, timeoutNanos: 100_000_000),
            observer: events)
        let loop = group.next()
        var failures: [RedisError] = []
        // Commands until the hole has seen a second connection: without the reset every one would
        // wait on the first connection forever. Bounded: 500 commands.
        for _ in 0..<500 where hole.accepted < 2 {
            do {
                _ = try await loop.flatSubmit { client.send(.command(["PING"]), on: loop) }.get()
                Issue.record("a blackhole answered")
            } catch let error as RedisError {
                failures.append(error)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(hole.accepted >= 2, "reconnected after the timeout")
        #expect(failures.first == .timeout)
        var closed = 0
        for _ in 0..<500 where closed == 0 {
            closed = hole.closed
            if closed == 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(closed >= 1, "the timed-out connection was closed by the client")
        let seen = events.events
        #expect(Array(seen.prefix(3)) == ["connected", "failed timeout", "disconnected timeout"], "\(seen)")
        try await client.close().get()
        try await group.shutdownGracefully()
        try await hole.stop()
    }

    @Test("one timeout under load is one failure: the commands its backoff fails at once do not open the breaker")
    func backoffFailuresAreNotCounted() async throws {
        let hole = try await Blackhole.start()
        let events = EventRecorder()
        // The breaker's and the backoff's clock stands still, so the backoff the timeout starts
        // lasts for the whole test.
        let now = NIOLockedValueBox<Int64>(1_000_000_000)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = RedisClient(
            group: group, configuration: RedisConfiguration(host: "127.0.0.1", port: hole.port, timeoutNanos: 100_000_000),
            observer: events, clock: { now.withLockedValue { $0 } })
        let loop = group.next()
        do {
            _ = try await loop.flatSubmit { client.send(.command(["PING"]), on: loop) }.get()
            Issue.record("a blackhole answered")
        } catch let error as RedisError {
            #expect(error == .timeout)
        }
        let results = try await loop.flatSubmit {
            EventLoopFuture.whenAllComplete((0..<10).map { _ in client.send(.command(["PING"]), on: loop) }, on: loop)
        }.get()
        for result in results {
            guard case .failure(let error as RedisError) = result, error == .unavailable else {
                Issue.record("not failed at once by the backoff: \(result)")
                continue
            }
        }
        #expect(results.count == 10)
        // Five failures open it (the default); eleven commands failed, one failure counted.
        #expect(try await client.breakerStates().get() == [.closed])
        #expect(events.events.filter { $0 == "failed unavailable" }.count == 10, "\(events.events)")
        try await client.close().get()
        try await group.shutdownGracefully()
        try await hole.stop()
    }

    @Test("a frozen Redis (SIGSTOP) fails commands by timeout, then fast; resumed (SIGCONT), it is used again without a restart")
    func frozenAndResumed() throws {
        let server = try RedisServerProcess()
        let events = EventRecorder()
        try withClient(
            server, observer: events,
            configure: {
                $0.timeoutNanos = 200_000_000; $0.breakerOpenNanos = 100_000_000
            }
        ) { client, loop in
            let pong = try loop.flatSubmit { client.send(.command(["PING"]), on: loop) }.wait()
            #expect(pong == .simpleString("PONG"))
            server.pause()
            let failures = try Self.failures(of: ["PING"], count: 8, client: client, on: loop, ifAnswered: "a frozen Redis answered")
            let frozen = events.events
            server.resume()
            #expect(failures.first == .timeout, "\(failures)")
            #expect(failures.contains(.circuitOpen) || failures.contains(.unavailable), "failed fast afterwards: \(failures)")
            #expect(frozen.contains("disconnected timeout"), "the frozen connection was closed: \(frozen)")
            var recovered = false
            for _ in 0..<500 where !recovered {
                recovered = (try? loop.flatSubmit { client.send(.command(["PING"]), on: loop) }.wait()) == .simpleString("PONG")
                if !recovered { try loop.scheduleTask(in: .milliseconds(20)) {}.futureResult.wait() }
            }
            #expect(recovered)
            let states = try client.breakerStates().wait()
            #expect(states == [.closed])
            let seen = events.events
            let reset = seen.firstIndex(of: "disconnected timeout") ?? seen.endIndex
            let reconnected = seen[reset...].firstIndex(of: "connected") ?? seen.endIndex
            #expect(seen[reconnected...].contains("replied"), "reconnected after the reset, and answered there: \(seen)")
        }
    }

    @Test("error replies (READONLY from a replica) are failures: the breaker opens, and a promoted node is used again")
    func readOnlyReplica() throws {
        let primary = try RedisServerProcess()
        let replica = try RedisServerProcess()
        try replica.replicate(primary)
        let events = EventRecorder()
        try withClient(
            replica, observer: events,
            configure: {
                $0.breakerFailures = 3; $0.breakerOpenNanos = 100_000_000
            }
        ) { client, loop in
            let failures = try Self.failures(
                of: ["SET", "k", "v"], count: 6, client: client, on: loop, ifAnswered: "a replica took a write")
            #expect(failures.first?.errorCode == "READONLY", "\(failures)")
            #expect(failures.contains(.circuitOpen), "the breaker counted the error replies: \(failures)")
            #expect(events.events.contains("failed error_reply"))
            // A failover promotes the node: the client finds it writable without a restart.
            _ = try replica.command(["REPLICAOF", "NO", "ONE"])
            var written = false
            for _ in 0..<500 where !written {
                written = (try? loop.flatSubmit { client.send(.command(["SET", "k", "v"]), on: loop) }.wait()) == .simpleString("OK")
                if !written { try loop.scheduleTask(in: .milliseconds(20)) {}.futureResult.wait() }
            }
            #expect(written)
            #expect(try client.breakerStates().wait() == [.closed])
        }
    }
}

/// Records what a client reports, in order: `connected`, `replied`, `failed <label>`,
/// `disconnected <label>`, `breaker <old>-><new>`.
final class EventRecorder: RedisObserver {
    private let box = NIOLockedValueBox<[String]>([])
    var events: [String] { box.withLockedValue { $0 } }
    func replied(afterNanos nanos: Int64) { box.withLockedValue { $0.append("replied") } }
    func failed(_ error: RedisError) { box.withLockedValue { $0.append("failed \(error.label)") } }
    func breakerChanged(from old: CircuitBreaker.State, to new: CircuitBreaker.State) {
        box.withLockedValue { $0.append("breaker \(old)->\(new)") }
    }
    func connected() { box.withLockedValue { $0.append("connected") } }
    func disconnected(_ reason: RedisError) { box.withLockedValue { $0.append("disconnected \(reason.label)") } }
}

/// A TCP server that accepts connections, reads what they send and never answers: a Redis behind a
/// blackholing network. Counts the connections it accepted and the ones that were closed.
final class Blackhole: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let counts: NIOLockedValueBox<(accepted: Int, closed: Int)>
    let port: Int

    var accepted: Int { counts.withLockedValue { $0.accepted } }
    var closed: Int { counts.withLockedValue { $0.closed } }

    private init(group: MultiThreadedEventLoopGroup, channel: any Channel, counts: NIOLockedValueBox<(accepted: Int, closed: Int)>) {
        self.group = group
        self.channel = channel
        self.counts = counts
        port = channel.localAddress?.port ?? 0
    }

    static func start() async throws -> Blackhole {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let counts = NIOLockedValueBox((accepted: 0, closed: 0))
        let channel = try await ServerBootstrap(group: group)
            .childChannelInitializer { child in
                counts.withLockedValue { $0.accepted += 1 }
                child.closeFuture.whenComplete { _ in counts.withLockedValue { $0.closed += 1 } }
                return child.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return Blackhole(group: group, channel: channel, counts: counts)
    }

    func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }
}

@Suite("Circuit breaker and backoff")
struct CircuitBreakerTests {
    @Test("opens after the threshold, fails fast, lets one probe through, and closes on its success")
    func breaker() {
        var breaker = CircuitBreaker(failureThreshold: 3, openNanos: 1000)
        var allowed: Bool
        for now in 0..<3 {
            allowed = breaker.allow(now: Int64(now))
            #expect(allowed)
            breaker.failed(now: Int64(now))
        }
        #expect(breaker.state == .open)
        allowed = breaker.allow(now: 500)
        #expect(!allowed)
        allowed = breaker.allow(now: 1002)
        #expect(allowed)
        #expect(breaker.state == .halfOpen)
        allowed = breaker.allow(now: 1003)
        #expect(!allowed, "one probe at a time")
        breaker.failed(now: 1004)
        #expect(breaker.state == .open)
        allowed = breaker.allow(now: 2000)
        #expect(!allowed)
        allowed = breaker.allow(now: 2004)
        #expect(allowed)
        breaker.succeeded()
        #expect(breaker.state == .closed)
        allowed = breaker.allow(now: 2005)
        #expect(allowed)
    }

    @Test("a success resets the count of failures")
    func successResets() {
        var breaker = CircuitBreaker(failureThreshold: 2, openNanos: 1000)
        breaker.failed(now: 0)
        breaker.succeeded()
        breaker.failed(now: 1)
        #expect(breaker.state == .closed)
    }

    @Test("the backoff doubles up to its maximum and resets on connection")
    func backoff() {
        var backoff = ReconnectBackoff(initialNanos: 10, maximumNanos: 35)
        #expect(backoff.mayAttempt(now: 0))
        backoff.attemptFailed(now: 0)
        #expect(!backoff.mayAttempt(now: 9))
        #expect(backoff.mayAttempt(now: 10))
        backoff.attemptFailed(now: 10)
        #expect(backoff.notBefore == 30)
        backoff.attemptFailed(now: 30)
        #expect(backoff.notBefore == 65)
        backoff.attemptFailed(now: 65)
        #expect(backoff.notBefore == 100)
        backoff.connected()
        #expect(backoff.mayAttempt(now: 0))
    }
}
