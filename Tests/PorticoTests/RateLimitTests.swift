import Dispatch
import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
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

    /// A monotonic clock that moves only when the test sets it, handed to the gateway's rate
    /// limiter: admissions then depend on the arrival times the test chose, not on how fast this
    /// machine happens to deliver the requests.
    final class VirtualClock: Sendable {
        private let nanos = NIOLockedValueBox<Int64>(1_000_000_000)
        var now: Int64 { nanos.withLockedValue { $0 } }
        func set(milliseconds: Int64) { nanos.withLockedValue { $0 = 1_000_000_000 + milliseconds * 1_000_000 } }
        var limiter: RateLimiter { RateLimiter(clock: { [nanos] in nanos.withLockedValue { $0 } }) }
    }

    /// At each virtual instant, one request on each connection, all sent before any answer is read
    /// (so the gateway handles them side by side), then the clock moves on. Returns every answer.
    static func rounds(
        _ gateway: TestGateway, clock: VirtualClock, connections: Int, instants: [Int64], target: @escaping @Sendable (Int) -> String,
        headers: [(String, String)] = []
    ) async throws -> [Answer] {
        try await offThePool {
            let clients = try (0..<connections).map { _ in try gateway.connect(receiveTimeout: 30) }
            var answers: [Answer] = []
            for instant in instants {
                clock.set(milliseconds: instant)
                for (index, client) in clients.enumerated() {
                    var text = "GET \(target(index)) HTTP/1.1\r\nHost: t\r\n"
                    for (name, value) in headers { text += "\(name): \(value)\r\n" }
                    try client.send(text + "\r\n")
                }
                for client in clients { answers.append(Self.answer(try client.readResponse())) }
            }
            return answers
        }
    }

    @Test("a key limited to 50/s with burst 10, sent 500 requests over one second by 5 connections: exactly burst + rate × time")
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
        let clock = VirtualClock()
        try await withGateway(rateLimiter: clock.limiter, policy: policy) { gateway, servers in
            // Five requests every 10 ms, from 0 to 990 ms.
            let answers = try await Self.rounds(
                gateway, clock: clock, connections: 5, instants: (0..<100).map { $0 * 10 }, target: { "/limited/\($0)" },
                headers: [("X-API-Key", "app.\(Self.secret)")])
            #expect(answers.count == 500)
            let admitted = answers.filter { $0.status == 200 }
            // The burst of 10 (at 0 and 10 ms), then one per emission interval (20 ms) from 20 to 980 ms.
            #expect(admitted.count == 10 + 49)
            #expect(servers[0].requestsReceived == admitted.count)
            #expect(admitted.allSatisfy { $0.rateLimitPolicy == #""tier.metered";q=50;w=1"# })
            #expect(admitted.allSatisfy { $0.rateLimit?.hasPrefix(#""tier.metered";r="#) == true })

            let refused = answers.filter { $0.status != 200 }
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
        let clock = VirtualClock()
        try await withGateway(rateLimiter: clock.limiter, policy: policy) { gateway, servers in
            // Four requests every 10 ms (two per service), from 0 to 590 ms.
            let answers = try await Self.rounds(
                gateway, clock: clock, connections: 4, instants: (0..<60).map { $0 * 10 },
                target: { $0 % 2 == 0 ? "/first/x" : "/second/x" })
            let received = servers[0].requestsReceived
            // The burst of 5, then one per emission interval (50 ms) from 50 to 550 ms: whichever
            // service a request came through, it drew from the one backend bucket.
            #expect(received == 5 + 11)
            #expect(received == answers.filter { $0.status == 200 }.count)
            let refused = answers.filter { $0.status != 200 }
            #expect(refused.count == 240 - received)
            #expect(refused.allSatisfy { $0.status == 429 && $0.limitKind == "backend" && $0.name == "echo" })
            #expect(answers.filter { $0.status == 200 }.allSatisfy { $0.rateLimitPolicy == #""backend.echo";q=20;w=1"# })
        }
    }

    @Test("maxConcurrent: with a slow backend, request number cap + 1 in flight gets 503; timeouts and hang-ups free their slots")
    func concurrencyCap() async throws {
        let handler: BackendServer.Handler = { request in
            request.path.hasSuffix("/hang") ? .hang : DemoBackends.echo(request)
        }
        // Two backends on the same server: `slow` never times out within the test (its requests
        // end only when the test lets them), `brief` times out at once. Nothing then depends on how
        // fast this machine gets through the steps.
        let policy: ([Int]) -> String = { ports in
            """
            backends:
              slow: { url: "http://127.0.0.1:\(ports[0])", timeout: 120s, maxConcurrent: 3 }
              brief: { url: "http://127.0.0.1:\(ports[0])", timeout: 200ms, maxConcurrent: 1 }
            services:
              svc: { path: /svc, versions: { 1: { proxy: { backend: slow } } } }
              quick: { path: /quick, versions: { 1: { proxy: { backend: brief } } } }
            """
        }
        try await withGateway(backends: [handler], policy: policy) { gateway, servers in
            let concurrency = gateway.gateway.rateLimiter.concurrency
            let hung = try (0..<3).map { _ in try gateway.connect(receiveTimeout: 60) }
            for client in hung { try client.send("GET /svc/hang HTTP/1.1\r\nHost: t\r\n\r\n") }
            #expect(await eventually { servers[0].requestsReceived == 3 })
            #expect(concurrency.inFlight("slow") == 3)

            for path in ["/svc/hang", "/svc/fast"] {
                let busy = try gateway.connect().request("GET", path)
                #expect(busy.status == 503)
                #expect(busy.header("retry-after") == "1")
                #expect(busy.json?["type"] as? String == "urn:portico:problem:backend-busy")
                #expect(busy.json?["backend"] as? String == "slow")
            }
            #expect(servers[0].requestsReceived == 3)

            // Two clients hang up: their exchanges are cancelled and their slots come back.
            hung[0].hangUp()
            hung[1].hangUp()
            #expect(await eventually { concurrency.inFlight("slow") == 1 })
            #expect(try gateway.connect().request("GET", "/svc/fast").status == 200)
            #expect(concurrency.inFlight("slow") == 1)
            hung[2].hangUp()
            #expect(await eventually { concurrency.inFlight("slow") == 0 })

            // A backend timeout gives its slot back too: the next request is admitted (and times out
            // in turn) rather than refused as busy.
            let timedOut = try gateway.connect(receiveTimeout: 60)
            for _ in 0..<2 {
                let answer = try await offThePool { try timedOut.request("GET", "/quick/hang") }
                #expect(answer.status == 504)
                #expect(concurrency.inFlight("brief") == 0)
            }
            // (Not how many reached the backend: on a loaded machine a 200 ms timeout can expire
            // while the request is still on its way.)
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
