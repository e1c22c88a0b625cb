import Dispatch
import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1
import Portico
import PorticoDemoBackends
import Testing

/// Rate limits through the running gateway: per key tier, per backend, per address, concurrency.
@Suite("Rate limits through the running gateway")
struct RateLimitTests {
    static let secret = "metered-secret-0123456789abcdefghijklmnopqrstuvwxyz"

    /// One answer, as much of it as these tests look at.
    struct Answer: Sendable {
        var status: Int
        var retryAfter: String?
        var rateLimitPolicy: String?
        var rateLimit: String?
        var problemType: String?
        var limitKind: String?
        var name: String?
    }

    static func answer(_ response: RawHTTPClient.Response) -> Answer {
        let json = response.json
        return Answer(
            status: response.status, retryAfter: response.header("retry-after"), rateLimitPolicy: response.header("ratelimit-policy"),
            rateLimit: response.header("ratelimit"), problemType: json?["type"] as? String, limitKind: json?["limit"] as? String,
            name: (json?["tier"] ?? json?["backend"]) as? String)
    }

    /// `clients` connections on threads of their own, each sending `perClient` requests on a fixed
    /// schedule (`spacing` apart, clients offset evenly), so that the gateway sees arrivals at a
    /// steady rate. Returns the answers, each request's send time (seconds from the first) and the
    /// span from the first send to the last answer.
    static func paced(
        _ gateway: TestGateway, clients: Int, perClient: Int, spacing: Duration, target: @escaping @Sendable (Int) -> String,
        headers: [(String, String)] = []
    ) async throws -> (answers: [Answer], sendTimes: [Double], wholeSpan: Double) {
        let answers = NIOLockedValueBox<[Answer]>([])
        let sends = NIOLockedValueBox<[UInt64]>([])
        let spacingNanos = UInt64(spacing.components.seconds) * 1_000_000_000 + UInt64(spacing.components.attoseconds / 1_000_000_000)
        let start = DispatchTime.now().uptimeNanoseconds + 50_000_000
        let done = DispatchGroup()
        for client in 0..<clients {
            done.enter()
            // A thread each (not concurrentPerform, which runs only as many at once as there are cores).
            Thread.detachNewThread {
                defer { done.leave() }
                guard let connection = try? gateway.connect(receiveTimeout: 10) else { return }
                for index in 0..<perClient {
                    let due = start + UInt64(index) * spacingNanos + UInt64(client) * spacingNanos / UInt64(clients)
                    let now = DispatchTime.now().uptimeNanoseconds
                    if due > now { usleep(UInt32((due - now) / 1000)) }
                    sends.withLockedValue { $0.append(DispatchTime.now().uptimeNanoseconds) }
                    if let response = try? connection.request("GET", target(client), headers: headers) {
                        answers.withLockedValue { $0.append(Self.answer(response)) }
                    }
                }
            }
        }
        try await offThePool { done.wait() }
        let end = DispatchTime.now().uptimeNanoseconds
        let times = sends.withLockedValue { $0 }.sorted()
        let first = times.first ?? 0
        return (answers.withLockedValue { $0 }, times.map { Double($0 - first) / 1e9 }, Double(end - first) / 1e9)
    }

    /// A reference model, independent of the gateway's code: a token bucket in floating point,
    /// `burst` tokens, refilled at `rate` per second. How many of `arrivals` it admits.
    static func tokenBucketAdmits(_ arrivals: [Double], rate: Double, burst: Double) -> Int {
        var tokens = burst
        var last = arrivals.first ?? 0
        var admitted = 0
        for time in arrivals {
            tokens = min(burst, tokens + (time - last) * rate)
            last = time
            if tokens >= 1 {
                tokens -= 1
                admitted += 1
            }
        }
        return admitted
    }

    @Test("a key limited to 50/s with burst 10, sent 500 requests over one second by 5 connections: GCRA's count within 5%")
    func keyTier() async throws {
        let policy: ([Int]) -> String = { ports in
            """
            backends: { echo: { url: "http://127.0.0.1:\(ports[0])" } }
            services:
              limited: { path: /limited, auth: apiKey, versions: { 1: { proxy: { backend: echo } } } }
            tiers:
              metered: { rate: 50/s, burst: 10 }
            keys:
              app: { secret: "\(Self.secret)", demo: true, services: [limited], tier: metered }
            """
        }
        try await withGateway(policy: policy) { gateway, _ in
            let run = try await Self.paced(
                gateway, clients: 5, perClient: 100, spacing: .milliseconds(10), target: { "/limited/\($0)" },
                headers: [("X-API-Key", "app.\(Self.secret)")])
            #expect(run.answers.count == 500)
            let admitted = run.answers.filter { $0.status == 200 }
            // What the algorithm allows for these arrivals (about 10 + 50 × 1 s when the machine keeps
            // the schedule; fewer when it stalled the senders for longer than a burst lasts).
            let expected = Self.tokenBucketAdmits(run.sendTimes, rate: 50, burst: 10)
            let tolerance = max(1, Int((Double(expected) * 0.05).rounded()))
            #expect(abs(admitted.count - expected) <= tolerance, "admitted \(admitted.count), expected \(expected) ± \(tolerance)")
            #expect(admitted.allSatisfy { $0.rateLimitPolicy == #""tier.metered";q=50;w=1"# })
            #expect(admitted.allSatisfy { $0.rateLimit?.hasPrefix(#""tier.metered";r="#) == true })

            let refused = run.answers.filter { $0.status != 200 }
            #expect(refused.count == 500 - admitted.count)
            for answer in refused {
                #expect(answer.status == 429)
                // The wait until the next admission is at most one emission interval, 20 ms: 1 s rounded up.
                #expect(answer.retryAfter == "1")
                #expect(answer.problemType == "urn:portico:problem:rate-limited")
                #expect(answer.limitKind == "tier" && answer.name == "metered")
                #expect(answer.rateLimit?.hasPrefix(#""tier.metered";r=0;t="#) == true)
            }
        }
    }

    @Test("a backend limit shared by two services: their combined traffic to it never exceeds it")
    func sharedBackendLimit() async throws {
        let policy: ([Int]) -> String = { ports in
            """
            backends:
              echo: { url: "http://127.0.0.1:\(ports[0])", rateLimit: { rate: 20/s, burst: 5 } }
            services:
              first: { path: /first, versions: { 1: { proxy: { backend: echo } } } }
              second: { path: /second, versions: { 1: { proxy: { backend: echo } } } }
            """
        }
        try await withGateway(policy: policy) { gateway, servers in
            let run = try await Self.paced(gateway, clients: 4, perClient: 60, spacing: .milliseconds(16)) {
                $0 % 2 == 0 ? "/first/x" : "/second/x"
            }
            let received = servers[0].requestsReceived
            // GCRA's most over the whole run (first send to last answer, which bounds the arrivals).
            let ceiling = 5 + Int(run.wholeSpan * 20) + 1
            #expect(received <= ceiling, "the backend received \(received), more than \(ceiling)")
            #expect(received == run.answers.filter { $0.status == 200 }.count)
            let modelled = Self.tokenBucketAdmits(run.sendTimes, rate: 20, burst: 5)
            #expect(abs(received - modelled) <= max(2, modelled / 20), "received \(received), the model admits \(modelled)")
            let refused = run.answers.filter { $0.status != 200 }
            #expect(!refused.isEmpty)
            #expect(refused.allSatisfy { $0.status == 429 && $0.limitKind == "backend" && $0.name == "echo" })
            #expect(run.answers.filter { $0.status == 200 }.allSatisfy { $0.rateLimitPolicy == #""backend.echo";q=20;w=1"# })
        }
    }

    @Test("maxConcurrent: with a slow backend, request number cap + 1 in flight gets 503; timeouts and hang-ups free their slots")
    func concurrencyCap() async throws {
        let handler: BackendServer.Handler = { request in
            request.path.hasSuffix("/hang") ? .hang : DemoBackends.echo(request)
        }
        let policy: ([Int]) -> String = { ports in
            """
            backends:
              slow: { url: "http://127.0.0.1:\(ports[0])", timeout: 6s, maxConcurrent: 3 }
            services:
              svc: { path: /svc, versions: { 1: { proxy: { backend: slow } } } }
            """
        }
        try await withGateway(backends: [handler], policy: policy) { gateway, servers in
            let concurrency = gateway.gateway.rateLimiter.concurrency
            let hung = try (0..<3).map { _ in try gateway.connect(receiveTimeout: 15) }
            for client in hung { try client.send("GET /svc/hang HTTP/1.1\r\nHost: t\r\n\r\n") }
            let arrived = ContinuousClock.now + .seconds(5)
            while servers[0].requestsReceived < 3, ContinuousClock.now < arrived { try await Task.sleep(for: .milliseconds(5)) }
            #expect(concurrency.inFlight("slow") == 3)

            for path in ["/svc/hang", "/svc/fast"] {
                let busy = try gateway.connect().request("GET", path)
                #expect(busy.status == 503)
                #expect(busy.header("retry-after") == "1")
                #expect(busy.json?["type"] as? String == "urn:portico:problem:backend-busy")
                #expect(busy.json?["backend"] as? String == "slow")
            }
            #expect(servers[0].requestsReceived == 3)

            // Two clients hang up (their exchanges are cancelled); the third waits for its 504.
            hung[0].hangUp()
            hung[1].hangUp()
            let released = ContinuousClock.now + .seconds(5)
            while concurrency.inFlight("slow") > 1, ContinuousClock.now < released { try await Task.sleep(for: .milliseconds(5)) }
            #expect(concurrency.inFlight("slow") <= 1)  // 1 unless the third has already timed out
            #expect(try gateway.connect().request("GET", "/svc/fast").status == 200)
            let third = hung[2]
            #expect(try await offThePool { try third.readResponse() }.status == 504)
            #expect(concurrency.inFlight("slow") == 0)
            #expect(try gateway.connect().request("GET", "/svc/fast").status == 200)
        }
    }

    @Test("a reload that changes one tier's rate resets that tier's buckets and keeps the others'")
    func reloadResetsOnlyChangedTiers() async throws {
        func policy(goldBurst: Int) -> ([Int]) -> String {
            { ports in
                """
                backends: { echo: { url: "http://127.0.0.1:\(ports[0])" } }
                services:
                  svc: { path: /svc, auth: apiKey, versions: { 1: { proxy: { backend: echo } } } }
                tiers:
                  gold: { rate: 1/m, burst: \(goldBurst) }
                  silver: { rate: 1/m, burst: 2 }
                keys:
                  gold-app: { secret: "gold-\(Self.secret)", demo: true, services: [svc], tier: gold }
                  silver-app: { secret: "silver-\(Self.secret)", demo: true, services: [svc], tier: silver }
                """
            }
        }
        try await withGateway(policy: policy(goldBurst: 2)) { gateway, servers in
            func call(_ key: String) throws -> Int {
                try gateway.connect().request("GET", "/svc/x", headers: [("X-API-Key", "\(key)-app.\(key)-\(Self.secret)")]).status
            }
            for key in ["gold", "silver"] {
                #expect(try (0..<3).map { _ in try call(key) } == [200, 200, 429])
            }
            try gateway.reload(policy: policy(goldBurst: 3)(servers.map(\.port)))
            #expect(try (0..<4).map { _ in try call("gold") } == [200, 200, 200, 429])
            #expect(try call("silver") == 429)
        }
    }

    @Test("unauthenticated services limit each client address; X-Forwarded-For does not buy a new bucket")
    func addressLimit() async throws {
        let policy: ([Int]) -> String = { ports in
            """
            backends: { echo: { url: "http://127.0.0.1:\(ports[0])" } }
            services:
              open: { path: /open, addressRateLimit: { rate: 1/m, burst: 3 }, versions: { 1: { proxy: { backend: echo } } } }
              other: { path: /other, versions: { 1: { proxy: { backend: echo } } } }
            """
        }
        try await withGateway(policy: policy) { gateway, _ in
            let statuses = try (0..<5).map { index in
                try gateway.connect().request("GET", "/open/x", headers: [("X-Forwarded-For", "203.0.113.\(index)")])
            }
            #expect(statuses.map(\.status) == [200, 200, 200, 429, 429])
            #expect(statuses[0].header("ratelimit") == #""address.open";r=2;t=60"#)
            #expect(statuses[3].json?["limit"] as? String == "address")
            #expect(Int(statuses[3].header("retry-after") ?? "") ?? 0 > 1)
            // Another service has no address limit; its answers carry no rate-limit fields.
            let other = try gateway.connect().request("GET", "/other/x")
            #expect(other.status == 200)
            #expect(other.header("ratelimit") == nil)
        }
    }
}
