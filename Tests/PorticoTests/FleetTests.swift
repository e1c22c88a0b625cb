import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PorticoDemoBackends
import PorticoPolicy
import PorticoRedis
import PorticoRedisTesting
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

/// Fleet mode against a real `redis-server`: the shared GCRA's arithmetic, two gateways sharing
/// one Redis, and what happens when Redis dies and comes back.
@Suite("Fleet mode through Redis", .enabled(if: RedisServerProcess.isInstalled), .serialized)
struct FleetTests {
    static let secret = "fleet-app-secret-0123456789abcdefghijklmnopqrstuvwxyz"

    /// A reproducible sequence of pseudo-random numbers (SplitMix64).
    struct SplitMix64 {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func next(below bound: Int64) -> Int64 { Int64(next() % UInt64(bound)) }
    }

    /// A sample's value in Prometheus text.
    static func metric(_ text: String, _ series: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
    }

    /// A fleet store on `server`, with a timeout no loaded machine meets, and the loop to decide from.
    static func fleetStore(_ server: RedisServerProcess) -> (FleetStore, any EventLoop) {
        var cluster = ClusterPolicy(redis: RedisAddress(host: "127.0.0.1", port: server.port))
        cluster.timeout = .seconds(5)
        return (FleetStore(cluster, group: MultiThreadedEventLoopGroup.singleton), MultiThreadedEventLoopGroup.singleton.next())
    }

    @Test("Redis's GCRA decides exactly as the in-process limiter: remaining, reset and retry-after")
    func sameArithmetic() async throws {
        let server = try RedisServerProcess()
        let (fleet, loop) = Self.fleetStore(server)
        var random = SplitMix64(state: 17)
        let policies = [
            RateLimitPolicy(count: 7, period: .seconds(60), burst: 3), RateLimitPolicy(count: 50, period: .seconds(1), burst: 10),
            RateLimitPolicy(count: 1000, period: .seconds(1), burst: 1), RateLimitPolicy(count: 3, period: .seconds(3600), burst: 2000),
            RateLimitPolicy(count: 1_000_000_000, period: .seconds(1), burst: 1_000_000),
        ]
        var compared = 0
        var refusals = 0
        for (index, policy) in policies.enumerated() {
            let limit = CompiledRateLimit(kind: .backend, name: "b\(index)", policy: policy)
            let draw = LimitDraw(limit: limit, key: RateLimitKey(scope: .backend, name: "equivalence-\(index)-\(UUID())"))
            let interval = limit.gcra.periodNanos / limit.gcra.count
            var now: Int64 = 10_000_000_000
            var state: GCRAState?
            for _ in 0..<400 {
                // Mostly bursts and gaps around the emission interval; sometimes the same instant,
                // sometimes a clock that went back a little.
                switch random.next(below: 10) {
                case 0: break
                case 1: now -= min(now - 1_000_000_000, random.next(below: max(2, interval)))
                case 2: now += random.next(below: max(2, interval * 20))
                default: now += random.next(below: max(2, interval / 2))
                }
                var expected = state ?? GCRAState(limit: limit.gcra, now: now)
                let decision = expected.acquire(now: now)
                state = expected
                let time = (1_800_000_000 + now / 1_000_000_000, now % 1_000_000_000)
                let verdict = try await loop.flatSubmit { fleet.decide([draw], nonce: nil, on: loop, testTime: time) }.get()
                switch verdict {
                case .admitted(let decisions), .limited(index: 0, let decisions):
                    #expect(decisions == [decision], "\(policy) at \(now)")
                default:
                    Issue.record("unexpected verdict \(verdict)")
                }
                compared += 1
                if !decision.allowed { refusals += 1 }
            }
        }
        #expect(compared == 2000)
        #expect(refusals > 100, "the sequences reach the limits")
        try await fleet.close().get()
    }

    static func policy(
        backend: Int, redis: Int, cluster: String = "timeout: 5s, onFailure: { limits: deny }", scheme: String = "redis"
    ) -> String {
        """
        signatures: { maxClockSkew: 300s, requireNonce: true }
        backends:
          echo: { url: "http://127.0.0.1:\(backend)" }
          limited: { url: "http://127.0.0.1:\(backend)", rateLimit: { rate: 1/h, burst: 6 } }
        services:
          signed: { path: /signed, auth: signature, versions: { 1: { proxy: { backend: echo } } } }
          open: { path: /open, versions: { 1: { proxy: { backend: limited } } } }
        tiers:
          metered: { rate: 1/h, burst: 4 }
          roomy: { rate: 1000/s, burst: 1000 }
          budget: { rate: 1000/s, burst: 1000, nonceQuota: 2 }
        keys:
          metered-app: { secret: "\(secret)", demo: true, services: [signed], tier: metered }
          roomy-app: { secret: "\(secret)", demo: true, services: [signed], tier: roomy }
          budget-app: { secret: "\(secret)", demo: true, services: [signed], tier: budget }
        \(redis > 0 ? "cluster: { redis: \"\(scheme)://127.0.0.1:\(redis)\", \(cluster) }" : "")
        """
    }

    /// Sends `count` requests alternately to each gateway; returns status, `RateLimit` and
    /// `Retry-After` of each answer.
    static func alternate(
        _ gateways: [TestGateway], count: Int, request: (Int) throws -> (String, [(String, String)])
    ) throws -> [(Int, String?, String?, String?)] {
        try (0..<count).map { index in
            let (target, headers) = try request(index)
            let response = try gateways[index % gateways.count].connect().request("GET", target, headers: headers)
            return (response.status, response.header("ratelimit"), response.header("retry-after"), response.json?["type"] as? String)
        }
    }

    @Test("two gateways sharing one Redis hold a key's tier limit and a backend's limit as one gateway does")
    func sharedLimits() async throws {
        let redis = try RedisServerProcess()
        let backend = try await BackendServer.start(handler: DemoBackends.echo)
        let signer = TestSigner(keyID: "metered-app", secret: Self.secret)
        // The sixth request finds the key without room for its nonce and marks it with its
        // `created` second; the seventh is signed in that same second, so both the fleet and the
        // single gateway refuse it under the mark (replay quota), whenever the runs happen. With
        // each request signed at its own second, a second boundary falling between the sixth and
        // the seventh in one run only made that run answer `rate-limited` instead.
        var created = Int64(Date().timeIntervalSince1970)
        let signed: (Int) throws -> (String, [(String, String)]) = { index in
            if index != 6 { created = Int64(Date().timeIntervalSince1970) }
            return ("/signed/x", try signer.headers("GET", "/signed/x", created: created))
        }
        let open: (Int) throws -> (String, [(String, String)]) = { _ in ("/open/x", []) }

        // One gateway alone, in memory: what the fleet must reproduce.
        let single = try await TestGateway.start(policy: Self.policy(backend: backend.port, redis: 0))
        let expectedTier = try Self.alternate([single], count: 7, request: signed)
        let expectedBackend = try Self.alternate([single], count: 9, request: open)
        await single.shutdown()
        #expect(expectedTier.map(\.0) == [200, 200, 200, 200, 429, 429, 429])
        #expect(expectedBackend.map(\.0) == [200, 200, 200, 200, 200, 200, 429, 429, 429])

        let first = try await TestGateway.start(policy: Self.policy(backend: backend.port, redis: redis.port))
        let second = try await TestGateway.start(policy: Self.policy(backend: backend.port, redis: redis.port))
        let tier = try Self.alternate([first, second], count: 7, request: signed)
        let backendLimit = try Self.alternate([first, second], count: 9, request: open)
        await first.shutdown()
        await second.shutdown()
        try await backend.shutdown()

        for (fleet, alone) in zip(tier + backendLimit, expectedTier + expectedBackend) {
            #expect(fleet.0 == alone.0)
            #expect(fleet.3 == alone.3)
            // `r` exactly; `t` (whole seconds up to a full bucket, counted from each bucket's first
            // request) may differ by the second the wall clock crossed meanwhile.
            #expect(fleet.1?.split(separator: ";").dropLast() == alone.1?.split(separator: ";").dropLast(), "\(fleet) vs \(alone)")
            // `Retry-After` likewise, by a second either way: the fleet's is reckoned on Redis's clock
            // (to the microsecond) and the single gateway's on its own, each rounded up to whole
            // seconds (seen once on CI: 301 against 300 for the replay quota).
            if let fleetWait = fleet.2.flatMap(Int.init), let aloneWait = alone.2.flatMap(Int.init) {
                #expect(abs(fleetWait - aloneWait) <= 1, "\(fleet) vs \(alone)")
            } else {
                #expect(fleet.2 == alone.2, "\(fleet) vs \(alone)")
            }
        }
        #expect(tier[4].3 == "urn:portico:problem:rate-limited")
        #expect(tier[6].3 == "urn:portico:problem:replay-quota-exceeded")
        // The buckets are Redis's: one per tier key and one for the backend.
        let buckets = try redis.command(["KEYS", "portico:rl:*"])
        #expect(buckets.array?.count == 2)
    }

    @Test("a nonce used at one gateway is a replay at the other, and a key's nonce budget is the fleet's")
    func sharedNonces() async throws {
        let redis = try RedisServerProcess()
        try await withGateway(policy: { Self.policy(backend: $0[0], redis: redis.port) }) { first, servers in
            let second = try await TestGateway.start(policy: Self.policy(backend: servers[0].port, redis: redis.port))
            let signer = TestSigner(keyID: "roomy-app", secret: Self.secret)
            let headers = try signer.headers("GET", "/signed/once")
            let original = try first.connect().request("GET", "/signed/once", headers: headers)
            #expect(original.status == 200)
            let replay = try second.connect().request("GET", "/signed/once", headers: headers)
            #expect(replay.status == 401)
            #expect(replay.json?["type"] as? String == "urn:portico:problem:signature-replayed")
            let again = try first.connect().request("GET", "/signed/once", headers: headers)
            #expect(again.status == 401)

            // A Redis that forgot the script (SCRIPT FLUSH, a failover) is sent it again.
            _ = try redis.command(["SCRIPT", "FLUSH"])
            let afterFlush = try second.connect().request("GET", "/signed/once", headers: try signer.headers("GET", "/signed/once"))
            #expect(afterFlush.status == 200, "\(afterFlush.bodyText)")

            let budget = TestSigner(keyID: "budget-app", secret: Self.secret)
            let answers = try (0..<3).map { index in
                try [first, second][index % 2].connect().request("GET", "/signed/b", headers: try budget.headers("GET", "/signed/b"))
            }
            #expect(answers.map(\.status) == [200, 200, 429])
            #expect(answers[2].json?["type"] as? String == "urn:portico:problem:replay-quota-exceeded")
            #expect(Int(answers[2].header("retry-after") ?? "") ?? 0 >= 1)
            await second.shutdown()
        }
    }

    @Test("an error reply to the script (a bucket key of another type) is Redis failing: onFailure applies, and it is counted")
    func scriptError() async throws {
        let redis = try RedisServerProcess()
        _ = try redis.command(["SET", FleetKeys.bucket(RateLimitKey(scope: .backend, name: "limited")), "not a hash"])
        try await withGateway(policy: { Self.policy(backend: $0[0], redis: redis.port) }) { gateway, _ in
            let response = try gateway.connect().request("GET", "/open/x")
            #expect(response.status == 503)
            #expect(response.json?["type"] as? String == "urn:portico:problem:shared-state-unavailable")
            let metrics = gateway.gateway.metrics.render()
            #expect(Self.metric(metrics, "portico_redis_errors_total{reason=\"error_reply\"}") == 1)
        }
    }

    @Test("adding, changing or removing the cluster section takes effect at the next restart")
    func clusterNeedsRestart() throws {
        let none = try TestGateway.snapshot(policy: Self.policy(backend: 1, redis: 0)).policy
        let one = try TestGateway.snapshot(policy: Self.policy(backend: 1, redis: 6379)).policy
        let other = try TestGateway.snapshot(policy: Self.policy(backend: 1, redis: 6380)).policy
        #expect(PolicyReloader.restartRequired(from: none, to: one) == ["cluster"])
        #expect(PolicyReloader.restartRequired(from: one, to: other) == ["cluster"])
        #expect(PolicyReloader.restartRequired(from: one, to: none) == ["cluster"])
        #expect(PolicyReloader.restartRequired(from: one, to: one) == [])
    }

    @Test("Redis keeps the nonce of a request a limit refused, and marks a key without room, as the in-memory store does")
    func refusedNoncesInRedis() async throws {
        let server = try RedisServerProcess()
        let (fleet, loop) = Self.fleetStore(server)
        let key = "mark-\(UUID())"
        let start: Int64 = 2_000_000_000
        func nonce(_ text: String, created: Int64) -> PendingNonce {
            PendingNonce(keyID: key, nonce: text, created: created, expiry: created + 10, quota: 2)
        }
        func decide(_ draws: [LimitDraw], _ pending: PendingNonce, at second: Int64) async throws -> FleetStore.Verdict {
            try await loop.flatSubmit { fleet.decide(draws, nonce: pending, on: loop, testTime: (second, 0)) }.get()
        }
        // A limit that admits one request: the second is refused, and its nonce kept all the same.
        let limit = CompiledRateLimit(kind: .tier, name: "one", policy: RateLimitPolicy(count: 1, period: .seconds(3600), burst: 1))
        let draw = LimitDraw(limit: limit, key: RateLimitKey(scope: .tier, name: "one", service: "s", subject: key))
        guard case .admitted = try await decide([draw], nonce("a", created: start), at: start) else {
            Issue.record("the first request was not admitted")
            return
        }
        guard case .limited = try await decide([draw], nonce("b", created: start), at: start) else {
            Issue.record("the second request was not limited")
            return
        }
        #expect(try await decide([], nonce("b", created: start), at: start) == .replayed)
        // The key's two places are taken: a third nonce marks the key instead.
        #expect(try await decide([], nonce("c", created: start + 1), at: start + 1) == .nonceQuotaExceeded(retryAfter: 9))
        // Once both places free, the marked signature is still refused; a newer one is admitted.
        #expect(try await decide([], nonce("c", created: start + 1), at: start + 10) == .nonceQuotaExceeded(retryAfter: 1))
        #expect(try await decide([], nonce("d", created: start + 10), at: start + 10) == .admitted([]))
        try await fleet.close().get()
    }

    @Test("with Redis down, onFailure: local limits and records nonces in each gateway's memory")
    func localFallback() async throws {
        let redis = try RedisServerProcess()
        redis.stop()
        let cluster = "onFailure: { limits: local, nonces: local }"
        try await withGateway(policy: { Self.policy(backend: $0[0], redis: redis.port, cluster: cluster) }) { gateway, _ in
            let signer = TestSigner(keyID: "metered-app", secret: Self.secret)
            let headers = try signer.headers("GET", "/signed/x")
            let original = try gateway.connect().request("GET", "/signed/x", headers: headers)
            #expect(original.status == 200)
            let replay = try gateway.connect().request("GET", "/signed/x", headers: headers)
            #expect(replay.status == 401, "replay caught locally")
            let statuses = try (0..<4).map { _ in
                try gateway.connect().request("GET", "/signed/x", headers: try signer.headers("GET", "/signed/x")).status
            }
            #expect(statuses == [200, 200, 200, 429], "the local bucket (burst 4) applies")
            let metrics = gateway.gateway.metrics.render()
            let failures = RedisMetrics.reasons.compactMap { Self.metric(metrics, "portico_redis_errors_total{reason=\"\($0)\"}") }
            // Five requests asked Redis; the replay was refused by the authentication stage, which
            // looks in the local store (where the fallback recorded the nonce) before any round trip.
            #expect(failures.reduce(0, +) == 5, "every failure is counted: \(failures)")
        }
    }

    @Test("with Redis down, onFailure: allow lets requests through without a limit")
    func allowFallback() async throws {
        let redis = try RedisServerProcess()
        redis.stop()
        let cluster = "onFailure: { limits: allow, nonces: local }"
        try await withGateway(policy: { Self.policy(backend: $0[0], redis: redis.port, cluster: cluster) }) { gateway, _ in
            let statuses = try (0..<9).map { _ in try gateway.connect().request("GET", "/open/x").status }
            #expect(statuses == Array(repeating: 200, count: 9), "the backend's burst of 6 does not apply")
        }
    }

    @Test("a Redis slower than the timeout is Redis failing: the request gets onFailure's answer, counted as a timeout")
    func slowRedis() async throws {
        let redis = try RedisServerProcess()
        let cluster = "timeout: 50ms, onFailure: { limits: deny, nonces: deny }"
        try await withGateway(policy: { Self.policy(backend: $0[0], redis: redis.port, cluster: cluster) }) { gateway, _ in
            let warm = try gateway.connect().request("GET", "/open/x")
            #expect(warm.status == 200)
            // Redis stops answering for 1.5 s (the command is sent from a thread of its own, whose
            // reply waits as long).
            let sleeping = Task { try await offThePool { try redis.command(["DEBUG", "SLEEP", "1.5"]) } }
            var refused: RawHTTPClient.Response?
            for _ in 0..<100 where refused == nil {
                let response = try gateway.connect().request("GET", "/open/x")
                if response.status == 503 { refused = response } else { try await Task.sleep(for: .milliseconds(10)) }
            }
            _ = try await sleeping.value
            #expect(refused?.json?["type"] as? String == "urn:portico:problem:shared-state-unavailable")
            #expect(refused?.header("retry-after") == "1")
            let metrics = gateway.gateway.metrics.render()
            #expect(Self.metric(metrics, "portico_redis_errors_total{reason=\"timeout\"}") ?? 0 >= 1)
        }
    }

    @Test("Redis killed under load: bounded 503 answers with onFailure deny, no hang, and recovery once it is back")
    func killedUnderLoad() async throws {
        let redis = try RedisServerProcess()
        let cluster = "onFailure: { limits: deny, nonces: deny }"
        try await withGateway(policy: { Self.policy(backend: $0[0], redis: redis.port, cluster: cluster) }) { gateway, _ in
            // An unlimited backend for the load: the open service's backend would run out.
            let statuses = NIOLockedValueBox<[(Int, String?, String?)]>([])
            let stop = NIOLockedValueBox(false)
            let signer = TestSigner(keyID: "roomy-app", secret: Self.secret)
            let load = (0..<3).map { _ in
                Task {
                    try await offThePool {
                        let client = try gateway.connect()
                        while !stop.withLockedValue({ $0 }) {
                            let response = try client.request("GET", "/signed/load", headers: try signer.headers("GET", "/signed/load"))
                            statuses.withLockedValue {
                                $0.append((response.status, response.json?["type"] as? String, response.header("retry-after")))
                            }
                        }
                    }
                }
            }
            func wait(until condition: @escaping ([(Int, String?, String?)]) -> Bool) async throws {
                for _ in 0..<1500 {
                    if statuses.withLockedValue({ condition($0) }) { return }
                    try await Task.sleep(for: .milliseconds(10))
                }
                Issue.record("condition not reached within 15 s")
            }
            try await wait { $0.count(where: { $0.0 == 200 }) >= 20 }
            redis.stop()
            let killedAt = statuses.withLockedValue { $0.count }
            try await wait { $0.dropFirst(killedAt).count(where: { $0.0 == 503 }) >= 30 }
            try redis.start()
            let restartedAt = statuses.withLockedValue { $0.count }
            try await wait { $0.dropFirst(restartedAt).contains(where: { $0.0 == 200 }) }
            stop.withLockedValue { $0 = true }
            for task in load { try await task.value }

            let all = statuses.withLockedValue { $0 }
            #expect(all.allSatisfy { $0.0 == 200 || $0.0 == 503 }, "\(Set(all.map(\.0)))")
            let refusals = all.filter { $0.0 == 503 }
            #expect(refusals.count >= 30)
            #expect(refusals.allSatisfy { $0.1 == "urn:portico:problem:shared-state-unavailable" && $0.2 == "1" })
            let metrics = gateway.gateway.metrics.render()
            #expect(Self.metric(metrics, "portico_redis_errors_total{reason=\"circuit_open\"}") ?? 0 > 0, "the breaker opened")
            #expect(Self.metric(metrics, "portico_redis_duration_seconds_count") ?? 0 >= 20)
            // Each event loop's breaker closes once a request on that loop finds Redis back: new
            // connections are spread over the loops, so a few reach every one (bounded: 10 s).
            var open = Self.metric(metrics, "portico_redis_breakers_open")
            for _ in 0..<500 where open != 0 {
                _ = try gateway.connect().request("GET", "/signed/load", headers: try signer.headers("GET", "/signed/load"))
                open = Self.metric(gateway.gateway.metrics.render(), "portico_redis_breakers_open")
                if open != 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(open == 0, "every breaker closed again after recovery")
        }
    }

    /// Sends requests to `target` until one answers `status`; its response, or nil after `tries`.
    static func poll(
        _ gateway: TestGateway, _ target: String, signer: TestSigner? = nil, until status: Int, tries: Int = 750
    ) async throws -> RawHTTPClient.Response? {
        for _ in 0..<tries {
            let response = try gateway.connect().request("GET", target, headers: try signer?.headers("GET", target) ?? [])
            if response.status == status { return response }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    @Test("a frozen Redis (SIGSTOP): requests get onFailure's answer, the connection is reset; resumed (SIGCONT), it is used again")
    func frozenRedis() async throws {
        let redis = try RedisServerProcess()
        let cluster = "timeout: 100ms, onFailure: { limits: deny, nonces: deny }"
        try await withGateway(policy: { Self.policy(backend: $0[0], redis: redis.port, cluster: cluster) }) { gateway, _ in
            // A key whose tier is far above what the test sends: a frozen Redis still runs, once
            // resumed, the commands it was sent meanwhile, so a small limit could be spent by then.
            let signer = TestSigner(keyID: "roomy-app", secret: Self.secret)
            let warm = try gateway.connect().request("GET", "/signed/x", headers: try signer.headers("GET", "/signed/x"))
            #expect(warm.status == 200)
            redis.pause()
            let refused = try await Self.poll(gateway, "/signed/x", signer: signer, until: 503)
            // Every request while frozen gets the same answer: none waits forever, none is let through.
            let more = try (0..<5).map { _ in
                try gateway.connect().request("GET", "/signed/x", headers: try signer.headers("GET", "/signed/x"))
            }
            let frozenMetrics = gateway.gateway.metrics.render()
            redis.resume()
            #expect(refused?.json?["type"] as? String == "urn:portico:problem:shared-state-unavailable")
            #expect(more.map(\.status) == Array(repeating: 503, count: 5))
            #expect(Self.metric(frozenMetrics, "portico_redis_errors_total{reason=\"timeout\"}") ?? 0 >= 1)
            #expect(Self.metric(frozenMetrics, "portico_redis_resets_total") ?? 0 >= 1, "the timed-out connection was closed")
            // Recovery without a restart: the breaker's probe finds Redis answering again.
            let recovered = try await Self.poll(gateway, "/signed/x", signer: signer, until: 200)
            #expect(recovered != nil, "Redis is used again after SIGCONT")
            let metrics = gateway.gateway.metrics.render()
            #expect(Self.metric(metrics, "portico_redis_connections_total") ?? 0 >= 2, "the first connection, and one made after the reset")
        }
    }

    @Test("a Redis that became a replica answers READONLY: onFailure applies, the error is counted; promoted, it is used again")
    func readOnlyReplica() async throws {
        let primary = try RedisServerProcess()
        let replica = try RedisServerProcess()
        try replica.replicate(primary)
        let cluster = "onFailure: { limits: deny, nonces: deny }"
        try await withGateway(policy: { Self.policy(backend: $0[0], redis: replica.port, cluster: cluster) }) { gateway, _ in
            let answers = try (0..<12).map { _ in try gateway.connect().request("GET", "/open/x") }
            #expect(answers.allSatisfy { $0.status == 503 }, "\(answers.map(\.status))")
            #expect(answers.first?.json?["type"] as? String == "urn:portico:problem:shared-state-unavailable")
            let metrics = gateway.gateway.metrics.render()
            #expect(Self.metric(metrics, "portico_redis_errors_total{reason=\"error_reply\"}") ?? 0 >= 1)
            #expect(Self.metric(metrics, "portico_redis_errors_total{reason=\"protocol\"}") ?? 0 == 0)
            #expect(try primary.command(["KEYS", "portico:*"]).array == [], "nothing was written anywhere")
            _ = try replica.command(["REPLICAOF", "NO", "ONE"])
            let recovered = try await Self.poll(gateway, "/open/x", until: 200)
            #expect(recovered != nil, "the promoted node is used without a restart")
            #expect(try replica.command(["KEYS", "portico:rl:*"]).array?.count == 1)
        }
    }

    static func facadePolicy(backend: Int, redis: Int) -> String {
        """
        backends:
          feed: { url: "http://127.0.0.1:\(backend)", rateLimit: { rate: 1/h, burst: 3 } }
        services:
          quote:
            path: /quote
            versions:
              1:
                facade:
                  parameters: /{symbol}
                  contract: { symbol: string, price: number }
                  sources:
                    only: { backend: feed, request: "/q/{symbol}", format: json, fields: { symbol: /symbol, price: /price } }
                  active: only
        \(redis > 0 ? "cluster: { redis: \"redis://127.0.0.1:\(redis)\", timeout: 5s, onFailure: { limits: deny } }" : "")
        """
    }

    @Test("a facade's fetches draw from their backend's limit in Redis: two gateways admit what one gateway does")
    func sharedFacadeBackendLimit() async throws {
        let redis = try RedisServerProcess()
        let backend = try await BackendServer.start { _ in
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            return .full(status: .ok, headers: headers, body: ByteBuffer(string: #"{"symbol":"AAPL","price":189.5}"#))
        }
        let quote: (Int) throws -> (String, [(String, String)]) = { _ in ("/quote/AAPL", []) }
        let single = try await TestGateway.start(policy: Self.facadePolicy(backend: backend.port, redis: 0))
        let alone = try Self.alternate([single], count: 8, request: quote)
        await single.shutdown()
        #expect(alone.count(where: { $0.0 == 200 }) == 3, "\(alone.map(\.0))")

        let first = try await TestGateway.start(policy: Self.facadePolicy(backend: backend.port, redis: redis.port))
        let second = try await TestGateway.start(policy: Self.facadePolicy(backend: backend.port, redis: redis.port))
        let fleet = try Self.alternate([first, second], count: 8, request: quote)
        await first.shutdown()
        await second.shutdown()
        try await backend.shutdown()
        #expect(fleet.map(\.0) == alone.map(\.0), "the fleet admits the limit once, not once per gateway")
        #expect(fleet.map(\.3) == alone.map(\.3))
        let buckets = try redis.command(["KEYS", "portico:rl:*"])
        #expect(buckets.array?.map(\.string) == [FleetKeys.bucket(RateLimitKey(scope: .backend, name: "feed"))])
    }

    @Test("over rediss:// two gateways share a backend's limit; a certificate that does not verify is Redis failing, counted as tls")
    func tlsRedis() async throws {
        let redis = try RedisServerProcess(
            tls: .init(
                certificate: TestCertificates.path("localhost.pem"), privateKey: TestCertificates.path("localhost-key.pem"),
                ca: TestCertificates.path("ca.pem")))
        let backend = try await BackendServer.start(handler: DemoBackends.echo)
        let trusted = "caFile: \"\(TestCertificates.path("ca.pem"))\", timeout: 5s, onFailure: { limits: deny }"
        let first = try await TestGateway.start(
            policy: Self.policy(backend: backend.port, redis: redis.port, cluster: trusted, scheme: "rediss"))
        let second = try await TestGateway.start(
            policy: Self.policy(backend: backend.port, redis: redis.port, cluster: trusted, scheme: "rediss"))
        let open: (Int) throws -> (String, [(String, String)]) = { _ in ("/open/x", []) }
        let statuses = try Self.alternate([first, second], count: 9, request: open).map(\.0)
        await first.shutdown()
        await second.shutdown()
        #expect(statuses == [200, 200, 200, 200, 200, 200, 429, 429, 429], "the backend's burst of 6, once for the fleet")
        #expect(try redis.command(["KEYS", "portico:rl:*"]).array?.count == 1)

        // A Redis whose certificate another CA signed: onFailure's answer, and the reason counted.
        let foreign = "caFile: \"\(TestCertificates.path("foreign-ca.pem"))\", timeout: 5s, onFailure: { limits: deny }"
        let recorder = RecordingLogHandler()
        let untrusting = try await TestGateway.start(
            policy: Self.policy(backend: backend.port, redis: redis.port, cluster: foreign, scheme: "rediss"),
            logger: Logger(label: "portico.test") { _ in recorder })
        let refused = try untrusting.connect().request("GET", "/open/x")
        // Enough on every event loop for its breaker to open, which is logged with the reason.
        let more = try (0..<12).map { _ in try untrusting.connect().request("GET", "/open/x").status }
        let metrics = untrusting.gateway.metrics.render()
        await untrusting.shutdown()
        try await backend.shutdown()
        #expect(refused.status == 503)
        #expect(refused.json?["type"] as? String == "urn:portico:problem:shared-state-unavailable")
        #expect(Self.metric(metrics, "portico_redis_errors_total{reason=\"tls\"}") ?? 0 >= 1)
        #expect(more == Array(repeating: 503, count: 12))
        let warnings = recorder.records.filter { $0.level == .warning && $0.message.hasPrefix("Redis is failing") }
        #expect(!warnings.isEmpty, "the breaker's opening is logged")
        #expect(
            warnings.allSatisfy { "\($0.metadata["error"] ?? "")".contains("certificate verify failed") }, "\(warnings.map(\.metadata))")
        #expect(try redis.command(["KEYS", "portico:rl:*"]).array?.count == 1, "nothing more was drawn")
    }

    @Test("a caFile OpenSSL cannot use stops the gateway's start, naming the file and key path")
    func unusableCAFile() async throws {
        let notPEM = FileManager.default.temporaryDirectory.appendingPathComponent("portico-ca-\(UUID().uuidString).pem").path
        try "not a certificate\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: notPEM) }
        for (file, words) in [(notPEM, "not a PEM file"), ("/nonexistent/portico-ca.pem", "cannot be opened")] {
            let policy = Self.policy(backend: 1, redis: 6380, cluster: "caFile: \"\(file)\"", scheme: "rediss")
            do {
                let gateway = try await TestGateway.start(policy: policy)
                await gateway.shutdown()
                Issue.record("a gateway started with caFile \(file)")
            } catch let error as PolicyError {
                #expect(error.diagnostics.map(\.keyPath) == ["cluster.caFile"], "\(error)")
                #expect(error.diagnostics.first?.file == "test.yaml")
                #expect(error.diagnostics.first?.message.contains(words) == true, "\(error)")
            }
        }
    }

    /// A code handler that answers 200 when its backend's fetch is admitted and answered.
    struct Relay: CodeHandler {
        func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse> {
            context.fetch(backend: "feed", target: "/").map { fetched in .json(status: fetched.status == 200 ? 200 : 502, [:]) }
        }
    }

    @Test("a code handler's fetches draw from their backend's limit in Redis: two gateways admit what one gateway does")
    func sharedCodeHandlerBackendLimit() async throws {
        let redis = try RedisServerProcess()
        let backend = try await BackendServer.start(handler: DemoBackends.echo)
        func start(_ redisPort: Int) async throws -> Gateway {
            let snapshot = try TestGateway.snapshot(
                policy: """
                    backends:
                      feed: { url: "http://127.0.0.1:\(backend.port)", rateLimit: { rate: 1/h, burst: 3 } }
                    services:
                      relay: { path: /relay, versions: { 1: { code: { name: relay, backends: [feed] } } } }
                    \(redisPort > 0 ? "cluster: { redis: \"redis://127.0.0.1:\(redisPort)\", timeout: 5s, onFailure: { limits: deny } }" : "")
                    """)
            let gateway = Gateway(snapshot: snapshot, codeHandlers: ["relay": Relay()])
            try await gateway.start()
            return gateway
        }
        func statuses(_ gateways: [Gateway]) throws -> [Int] {
            try (0..<8).map { index in
                try RawHTTPClient(port: gateways[index % gateways.count].boundPorts["test"]!, receiveTimeout: 10).request("GET", "/relay/x")
                    .status
            }
        }
        let single = try await start(0)
        let alone = try statuses([single])
        await single.shutdown()
        #expect(alone.count(where: { $0 == 200 }) == 3, "\(alone)")
        let first = try await start(redis.port)
        let second = try await start(redis.port)
        let fleet = try statuses([first, second])
        await first.shutdown()
        await second.shutdown()
        try await backend.shutdown()
        #expect(fleet == alone, "the fleet admits the limit once, not once per gateway")
        #expect(
            try redis.command(["KEYS", "portico:rl:*"]).array?.map(\.string) == [
                FleetKeys.bucket(RateLimitKey(scope: .backend, name: "feed"))
            ])
    }

    @Test("a script missing when the breaker half-opens (SCRIPT FLUSH meanwhile) is sent whole, and the probe's success closes the breaker")
    func noScriptProbe() async throws {
        let redis = try RedisServerProcess()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let now = NIOLockedValueBox<Int64>(1_000_000_000_000)
        var cluster = ClusterPolicy(redis: RedisAddress(host: "127.0.0.1", port: redis.port))
        cluster.timeout = .seconds(5)
        let fleet = FleetStore(cluster, group: group, clock: { now.withLockedValue { $0 } })
        let loop = group.next()
        let limit = CompiledRateLimit(kind: .backend, name: "b", policy: RateLimitPolicy(count: 1000, period: .seconds(1), burst: 1000))
        let draw = LimitDraw(limit: limit, key: RateLimitKey(scope: .backend, name: "probe"))
        let decide = { try await loop.flatSubmit { fleet.decide([draw], nonce: nil, on: loop) }.get() }
        #expect(
            try await decide() == .admitted([RateLimitDecision(allowed: true, remaining: 999, resetNanos: 1_000_000, retryAfterNanos: 0)]))
        // A bucket key of another type: error replies, five of which open the breaker.
        _ = try redis.command(["SET", FleetKeys.bucket(draw.key), "not a hash"])
        for _ in 0..<5 { await #expect(throws: RedisError.self) { try await decide() } }
        await #expect(throws: RedisError.circuitOpen) { try await decide() }
        #expect(try await fleet.client.breakerStates().get() == [.open])
        _ = try redis.command(["DEL", FleetKeys.bucket(draw.key)])
        _ = try redis.command(["SCRIPT", "FLUSH"])
        // Past the open time, one request is the probe: NOSCRIPT, then the script sent whole.
        now.withLockedValue { $0 += 2_000_000_000 }
        let probe = try? await decide()
        guard case .admitted = probe else {
            Issue.record("the probe was not admitted: \(String(describing: probe))")
            return
        }
        #expect(try await fleet.client.breakerStates().get() == [.closed])
        #expect(try redis.command(["SCRIPT", "EXISTS", FleetScript.sha1]) == .array([.integer(1)]), "cached again")
        try await fleet.close().get()
        try await group.shutdownGracefully()
    }
}
