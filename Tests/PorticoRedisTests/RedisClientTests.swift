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
        _ server: RedisServerProcess, configure: (inout RedisConfiguration) -> Void = { _ in },
        _ body: (RedisClient, any EventLoop) throws -> Void
    ) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        var configuration = RedisConfiguration(host: "127.0.0.1", port: server.port, timeoutNanos: 2_000_000_000)
        configure(&configuration)
        let client = RedisClient(group: group, configuration: configuration)
        defer { try? client.close().wait() }
        try body(client, group.next())
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
            let error = try loop.flatSubmit { client.send(.command(["NOSUCHCOMMAND"]), on: loop) }.wait()
            guard case .error(let message) = error else { Issue.record("expected an error reply, got \(error)"); return }
            #expect(message.hasPrefix("ERR"))
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
            var failures: [RedisError] = []
            for _ in 0..<8 {
                do {
                    _ = try loop.flatSubmit { client.send(.command(["PING"]), on: loop) }.wait()
                    Issue.record("a dead Redis answered")
                } catch let error as RedisError {
                    failures.append(error)
                }
            }
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

    @Test("a slow reply times out; the commands behind it still get their own replies")
    func timeout() throws {
        let server = try RedisServerProcess()
        try withClient(server, configure: { $0.timeoutNanos = 100_000_000 }) { client, loop in
            let (slow, next) = try loop.submit {
                (
                    client.send(.command(["DEBUG", "SLEEP", "0.3"]), on: loop),
                    client.send(.command(["ECHO", "behind"]), on: loop)
                )
            }.wait()
            #expect(throws: RedisError.timeout) { try slow.wait() }
            #expect(throws: RedisError.timeout) { try next.wait() }
            // Once Redis is responsive again, the same connection answers in step: the late
            // replies went to the commands that had timed out, not to these.
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
        }
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
