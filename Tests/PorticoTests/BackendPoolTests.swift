import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

@testable import Portico

/// Backends of several targets through the running gateway, against real socket servers: a target
/// that refuses connections, one that resets, one that answers 503 to everything, one that never
/// answers; balancing, ejection on an injected clock, retries that never apply a write twice.
@Suite("Backend pools: balancing, outlier ejection and safe retries")
struct BackendPoolTests {
    /// Counts requests by method and answers 200 with `name`.
    final class CountingBackend: Sendable {
        let name: String
        let counts = Mutex<[String: Int]>([:])
        init(_ name: String) { self.name = name }

        var handler: BackendServer.Handler {
            { [self] request in
                counts.withLock { $0[request.method.rawValue, default: 0] += 1 }
                return .full(status: .ok, headers: ["Content-Type": "text/plain"], body: ByteBuffer(string: name))
            }
        }
        func count(_ method: String) -> Int { counts.withLock { $0[method] ?? 0 } }
        var total: Int { counts.withLock { $0.values.reduce(0, +) } }
    }

    /// A target that answers 503 to everything, counting what it is sent.
    final class FailingBackend: Sendable {
        let counts = Mutex<[String: Int]>([:])
        var handler: BackendServer.Handler {
            { [self] request in
                counts.withLock { $0[request.method.rawValue, default: 0] += 1 }
                return .full(status: .serviceUnavailable, headers: ["Content-Type": "text/plain"], body: ByteBuffer(string: "down"))
            }
        }
        func count(_ method: String) -> Int { counts.withLock { $0[method] ?? 0 } }
    }

    /// A monotonic clock the test moves.
    final class ManualClock: Sendable {
        let nanos = Mutex<Int64>(1_000_000_000_000)
        func advance(by duration: Duration) { nanos.withLock { $0 += duration.nanoseconds } }
        var registry: TargetRegistry { TargetRegistry(clock: { [self] in nanos.withLock { $0 } }) }
    }

    static func policy(_ targets: [String], backend extra: String = "", service: String = "") -> String {
        """
        backends:
          pool:
            targets: [\(targets.map { "{ url: \"http://127.0.0.1:\($0)\" }" }.joined(separator: ", "))]
        \(extra.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n"))
        services:
          api:
            path: /api
            versions: { 1: { proxy: { backend: pool } } }
        \(service)
        """
    }

    /// Starts a gateway (with `registry`) in front of `policy`, runs `body`, stops it.
    static func withPool(
        _ policy: String, registry: TargetRegistry = TargetRegistry(), resolver: any AddressResolver = SystemAddressResolver(),
        logger: Logger? = nil, _ body: (TestGateway) async throws -> Void
    ) async throws {
        let snapshot = try TestGateway.snapshot(policy: policy, accessLog: logger != nil)
        var quiet = Logger(label: "portico.test")
        quiet.logLevel = .error
        let gateway = Gateway(snapshot: snapshot, logger: logger ?? quiet, targets: registry, resolver: resolver)
        try await gateway.start()
        let test = TestGateway(gateway: gateway, port: gateway.boundPorts["test"]!)
        do {
            try await body(test)
        } catch {
            await test.shutdown()
            throw error
        }
        await test.shutdown()
    }

    @Test("round robin follows the weights, interleaved: 2:1 sends two of every three requests to the heavier")
    func weightedRoundRobin() async throws {
        let heavy = CountingBackend("heavy")
        let light = CountingBackend("light")
        let servers = [try await BackendServer.start(handler: heavy.handler), try await BackendServer.start(handler: light.handler)]
        let policy = """
            backends:
              pool:
                targets: [{ url: "http://127.0.0.1:\(servers[0].port)", weight: 2 }, { url: "http://127.0.0.1:\(servers[1].port)" }]
            services:
              api: { path: /api, versions: { 1: { proxy: { backend: pool } } } }
            """
        try await Self.withPool(policy) { gateway in
            let client = try gateway.connect()
            var order: [String] = []
            for _ in 0..<30 {
                let response = try client.request("GET", "/api/x")
                #expect(response.status == 200)
                order.append(response.bodyText)
            }
            #expect(heavy.count("GET") == 20)
            #expect(light.count("GET") == 10)
            // Smooth: never three of the heavier in a row.
            #expect(!order.joined(separator: ",").contains("heavy,heavy,heavy"), "\(order)")
        }
        for server in servers { try await server.shutdown() }
    }

    @Test(
        "a target that refuses connections: every request, a POST too, is retried on another; after five failures it is ejected until its time is up"
    )
    func connectFailureRetriedAndEjected() async throws {
        let alive = CountingBackend("alive")
        let server = try await BackendServer.start(handler: alive.handler)
        let dead = try RefusingPort.make()
        let clock = ManualClock()
        let registry = clock.registry
        let recorder = RecordingLogHandler()
        let policy = Self.policy(
            [String(dead), String(server.port)],
            backend: "retries: { attempts: 2, on: [connect-failure] }\noutlierDetection: { consecutiveFailures: 5, ejectFor: 30s }")
        try await Self.withPool(policy, registry: registry, logger: Logger(label: "pool") { _ in recorder }) { gateway in
            let client = try gateway.connect()
            for index in 0..<20 {
                let response = try client.request(index % 2 == 0 ? "GET" : "POST", "/api/x", body: index % 2 == 0 ? nil : "order")
                #expect(response.status == 200, "request \(index): \(response.bodyText)")
            }
            #expect(alive.total == 20)
            let attempts = recorder.records.filter { $0.message == "access" }.map { $0.metadata["upstream_attempts"]?.description ?? "1" }
            // Round robin sends every other request to the dead target first, until it is ejected
            // after its fifth failure; then no request tries it.
            #expect(attempts.filter { $0 == "2" }.count == 5, "\(attempts)")
            #expect(attempts.suffix(10).allSatisfy { $0 == "1" }, "\(attempts)")

            // Thirty seconds later it is tried again (and fails again, ejected for twice as long).
            clock.advance(by: .seconds(31))
            for _ in 0..<4 { _ = try client.request("GET", "/api/x") }
            let later = recorder.records.filter { $0.message == "access" }.suffix(4).map {
                $0.metadata["upstream_attempts"]?.description ?? "1"
            }
            #expect(later.contains("2"), "the ejection did not end: \(later)")
        }
        try await server.shutdown()
    }

    @Test("a target answering 503: a GET is retried and answered by the other, a POST is not retried and reaches one target only")
    func statusRetryOnlyForIdempotent() async throws {
        let good = CountingBackend("good")
        let bad = FailingBackend()
        let servers = [try await BackendServer.start(handler: bad.handler), try await BackendServer.start(handler: good.handler)]
        let policy = Self.policy(
            servers.map { String($0.port) }, backend: "retries: { attempts: 2, on: [503] }\noutlierDetection: off")
        try await Self.withPool(policy) { gateway in
            let client = try gateway.connect()
            for _ in 0..<6 {
                let response = try client.request("GET", "/api/x")
                #expect(response.status == 200)
                #expect(response.bodyText == "good")
            }
            var postStatuses: [Int] = []
            for _ in 0..<6 { postStatuses.append(try client.request("POST", "/api/x", body: "once").status) }
            // Every other POST went to the failing target first and got its 503; none was sent twice.
            #expect(postStatuses.filter { $0 == 503 }.count == 3, "\(postStatuses)")
            #expect(bad.count("POST") + good.count("POST") == 6)
            // With an Idempotency-Key, the POST may be retried.
            for _ in 0..<2 {
                let keyed = try client.request("POST", "/api/x", headers: [("Idempotency-Key", UUID().uuidString)], body: "keyed")
                #expect(keyed.status == 200)
            }
        }
        for server in servers { try await server.shutdown() }
    }

    @Test("a target that resets after reading the request: a GET is retried, a POST gets 502 and is never sent twice")
    func resetRetryOnlyForIdempotent() async throws {
        let good = CountingBackend("good")
        let posts = Mutex(0)
        let resetting = try await ScriptedBackend.start { request in
            if request.method == "POST" { posts.withLock { $0 += 1 } }
            return [.close]
        }
        let server = try await BackendServer.start(handler: good.handler)
        let policy = Self.policy(
            [String(resetting.port), String(server.port)], backend: "retries: { attempts: 2, on: [reset] }\noutlierDetection: off")
        try await Self.withPool(policy) { gateway in
            let client = try gateway.connect()
            for _ in 0..<4 { #expect(try client.request("GET", "/api/x").status == 200) }
            var statuses: [Int] = []
            for _ in 0..<4 { statuses.append(try gateway.connect().request("POST", "/api/x", body: "once").status) }
            #expect(statuses.sorted() == [200, 200, 502, 502], "\(statuses)")
            #expect(good.count("POST") == 2)
            #expect(posts.withLock { $0 } == 2, "two POSTs reached it, each once")
        }
        try await server.shutdown()
        try await resetting.shutdown()
    }

    @Test("every target down: 503 backend-unavailable at once, with Retry-After until the first ejection ends")
    func allDown() async throws {
        let ports = [try RefusingPort.make(), try RefusingPort.make()]
        let clock = ManualClock()
        let policy = Self.policy(
            ports.map(String.init), backend: "outlierDetection: { consecutiveFailures: 1, ejectFor: 10s, maxEjectedPercent: 100% }")
        try await Self.withPool(policy, registry: clock.registry) { gateway in
            let client = try gateway.connect()
            #expect(try client.request("GET", "/api/x").status == 502)
            #expect(try client.request("GET", "/api/x").status == 502)
            let refused = try client.request("GET", "/api/x")
            #expect(refused.status == 503)
            #expect(refused.json?["type"] as? String == "urn:portico:problem:backend-unavailable")
            #expect(refused.header("retry-after") == "10")
            clock.advance(by: .seconds(6))
            #expect(try client.request("GET", "/api/x").header("retry-after") == "4")
            clock.advance(by: .seconds(5))
            #expect(try client.request("GET", "/api/x").status == 502, "the ejections ended: tried again")
        }
    }

    @Test("hash on a header: the same value always reaches the same target; values spread over both")
    func consistentHash() async throws {
        let first = CountingBackend("first")
        let second = CountingBackend("second")
        let servers = [try await BackendServer.start(handler: first.handler), try await BackendServer.start(handler: second.handler)]
        let policy = Self.policy(servers.map { String($0.port) }, backend: "balance: hash\nhashOn: header:X-Tenant")
        try await Self.withPool(policy) { gateway in
            let client = try gateway.connect()
            var owner: [String: String] = [:]
            for round in 0..<3 {
                for tenant in (0..<20).map({ "tenant-\($0)" }) {
                    let answer = try client.request("GET", "/api/x", headers: [("X-Tenant", tenant)]).bodyText
                    if round == 0 { owner[tenant] = answer } else { #expect(owner[tenant] == answer, "\(tenant) moved") }
                }
            }
            #expect(Set(owner.values) == ["first", "second"])
        }
        for server in servers { try await server.shutdown() }
    }

    @Test("a facade over a pool with a dead target answers from its source, not its fallback")
    func facadeUsesThePool() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.quotes)
        let dead = try RefusingPort.make()
        let policy = """
            backends:
              pool:
                targets: [{ url: "http://127.0.0.1:\(dead)" }, { url: "http://127.0.0.1:\(server.port)" }]
                retries: { attempts: 2, on: [connect-failure] }
              spare: { url: "http://127.0.0.1:\(server.port)" }
            services:
              quotes:
                path: /quotes
                versions:
                  1:
                    facade:
                      parameters: /{symbol}
                      contract: { symbol: string, price: number }
                      sources:
                        primary:
                          backend: pool
                          request: /v1/quotes/{symbol}
                          format: json
                          fields: { symbol: /symbol, price: /currentPrice }
                        fallback:
                          backend: spare
                          request: /v1/quotes/{symbol}
                          format: json
                          fields: { symbol: /symbol, price: /currentPrice }
                      active: primary
                      fallback: [fallback]
            """
        let recorder = RecordingLogHandler()
        try await Self.withPool(policy, logger: Logger(label: "pool") { _ in recorder }) { gateway in
            let client = try gateway.connect()
            for _ in 0..<4 { #expect(try client.request("GET", "/quotes/AAPL").status == 200) }
            let sources = recorder.records.filter { $0.message == "access" }.compactMap { $0.metadata["source"]?.description }
            #expect(sources == ["primary", "primary", "primary", "primary"], "\(sources)")
        }
        try await server.shutdown()
    }

    @Test("a target failing its health checks is left out until it passes them again")
    func healthChecks() async throws {
        let healthy = Mutex(false)
        let flaky: BackendServer.Handler = { request in
            if request.path == "/healthz" {
                let up = healthy.withLock { $0 }
                return .full(status: up ? .ok : .serviceUnavailable, headers: [:], body: ByteBuffer(string: up ? "ok" : "down"))
            }
            return .full(status: .ok, headers: ["Content-Type": "text/plain"], body: ByteBuffer(string: "flaky"))
        }
        let steady: BackendServer.Handler = { request in
            .full(
                status: .ok, headers: ["Content-Type": "text/plain"], body: ByteBuffer(string: request.path == "/healthz" ? "ok" : "steady")
            )
        }
        let servers = [try await BackendServer.start(handler: flaky), try await BackendServer.start(handler: steady)]
        let policy = Self.policy(
            servers.map { String($0.port) },
            backend: "healthCheck: { path: /healthz, interval: 100ms, timeout: 100ms, healthyAfter: 1, unhealthyAfter: 1 }")
        try await Self.withPool(policy) { gateway in
            let client = try gateway.connect()
            func answers() throws -> Set<String> {
                var seen: Set<String> = []
                for _ in 0..<6 { seen.insert(try client.request("GET", "/api/x").bodyText) }
                return seen
            }
            #expect(await eventually { (try? answers()) == ["steady"] }, "the failing target kept getting requests")
            healthy.withLock { $0 = true }
            #expect(await eventually { (try? answers()) == ["flaky", "steady"] }, "the recovered target got no request")
        }
        for server in servers { try await server.shutdown() }
    }

    @Test("least request with a cap per target: two requests in flight take one target each; a third finds both full and gets 503")
    func perTargetCap() async throws {
        let backends = [try await HeldBackend.start(body: "{}"), try await HeldBackend.start(body: "{}")]
        let policy = Self.policy(
            backends.map { String($0.port) },
            // The held requests must outlast the whole test however loaded the machine is (a CI run
            // once spent over 30 s, the default timeout, before the third request): the timeout
            // only bounds a failure here.
            backend: "balance: leastRequest\nmaxConcurrentPerTarget: 1\noutlierDetection: off\ntimeout: 600s")
        try await Self.withPool(policy) { gateway in
            // Generous read bounds: a loaded machine may take long to answer once released.
            let first = try gateway.connect(receiveTimeout: 90)
            let second = try gateway.connect(receiveTimeout: 90)
            try first.send("GET /api/a HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(await eventually { backends.map(\.requestsReceived).reduce(0, +) == 1 })
            try second.send("GET /api/b HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(await eventually { backends.map(\.requestsReceived).reduce(0, +) == 2 })
            #expect(backends.map(\.requestsReceived) == [1, 1], "the second request went to the busy target")
            let third = try await offThePool { try gateway.connect(receiveTimeout: 90).request("GET", "/api/c") }
            #expect(third.status == 503)
            #expect(third.json?["type"] as? String == "urn:portico:problem:backend-busy")
            for backend in backends { backend.release() }
            let released = try await offThePool { (try first.readResponse().status, try second.readResponse().status) }
            #expect(released.0 == 200 && released.1 == 200, "\(released)")
            let after = try await offThePool { try gateway.connect(receiveTimeout: 90).request("GET", "/api/d").status }
            #expect(after == 200, "the places were given back")
        }
        for backend in backends { try await backend.shutdown() }
    }

    @Test("/admin/backends and /metrics show each target's state; a reload that keeps a target keeps its ejection")
    func reportedAndKeptAcrossReloads() async throws {
        let dead = try RefusingPort.make()
        func backends(_ ports: [Int], timeout: String) -> String {
            """
            backends:
              pool:
                targets: [{ url: "http://127.0.0.1:\(dead)" }, { url: "http://127.0.0.1:\(ports[0])" }]
                timeout: \(timeout)
                outlierDetection: { consecutiveFailures: 1, ejectFor: 60s }
                retries: { attempts: 2, on: [connect-failure] }
            services:
              api: { path: /api, versions: { 1: { proxy: { backend: pool } } } }
            """
        }
        try await withReloadableGateway(backends: [namedBackend("alive")], files: { ["services.yaml": backends($0, timeout: "5s")] }) {
            gateway, servers in
            let client = try RawHTTPClient(port: gateway.port)
            for _ in 0..<2 { #expect(try client.request("GET", "/api/x").status == 200) }
            func deadTarget() async throws -> [String: Any]? {
                let answer = try await offThePool { try gateway.adminRequest("GET", "/admin/backends") }
                let report = ReloadableGateway.json(answer)
                let pool = (report["backends"] as? [String: Any])?["pool"] as? [String: Any]
                let targets = pool?["targets"] as? [[String: Any]]
                return targets?.first { ($0["url"] as? String) == "http://127.0.0.1:\(dead)" }
            }
            let ejected = try #require(try await deadTarget())
            #expect(ejected["up"] as? Bool == false)
            #expect(ejected["ejectionsTotal"] as? Int == 1)
            #expect(ejected["failuresTotal"] as? Int == 1)
            #expect((ejected["ejectedForSeconds"] as? Int).map { (1...60).contains($0) } == true)
            let metrics = try await offThePool { try gateway.adminRequest("GET", "/metrics") }.bodyText
            #expect(metrics.contains("portico_backend_target_up{backend=\"pool\",target=\"http://127.0.0.1:\(dead)\"} 0"))
            #expect(metrics.contains("portico_backend_target_up{backend=\"pool\",target=\"http://127.0.0.1:\(servers[0].port)\"} 1"))
            #expect(metrics.contains("portico_backend_retries_total{backend=\"pool\"} 1"))

            try gateway.write("services.yaml", backends([servers[0].port], timeout: "6s"))
            let answer = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(answer.status == 200)
            #expect(try await deadTarget()?["up"] as? Bool == false, "the reload forgot the ejection")
            #expect(try client.request("GET", "/api/x").status == 200)
            #expect(try await deadTarget()?["failuresTotal"] as? Int == 1, "the ejected target was tried after the reload")
        }
    }

    @Test("a target ejected for failing, and failing its checks, is used again as soon as its checks pass, not when its ejection ends")
    func recoveryEndsEjection() async throws {
        let up = Mutex(false)
        let sick: BackendServer.Handler = { _ in
            let healthy = up.withLock { $0 }
            return .full(
                status: healthy ? .ok : .serviceUnavailable, headers: ["Content-Type": "text/plain"],
                body: ByteBuffer(string: healthy ? "sick" : "down"))
        }
        let steady = CountingBackend("steady")
        let servers = [try await BackendServer.start(handler: sick), try await BackendServer.start(handler: steady.handler)]
        let policy = Self.policy(
            servers.map { String($0.port) },
            backend: """
                healthCheck: { path: /healthz, interval: 100ms, timeout: 100ms, healthyAfter: 1, unhealthyAfter: 1 }
                outlierDetection: { consecutiveFailures: 1, ejectFor: 1h }
                retries: { attempts: 2, on: [503] }
                """)
        let registry = TargetRegistry()
        let sickState = registry.state(backend: "pool", origin: "http://127.0.0.1:\(servers[0].port)")
        try await Self.withPool(policy, registry: registry) { gateway in
            let client = try gateway.connect()
            func answers() throws -> Set<String> {
                var seen: Set<String> = []
                for _ in 0..<6 { seen.insert(try client.request("GET", "/api/x").bodyText) }
                return seen
            }
            #expect(await eventually { (try? answers()) == ["steady"] })
            #expect(await eventually { sickState.health == .unhealthy })
            // Whether its requests or its checks found it down first, it has earned an hour's ejection.
            sickState.ejectedUntil.store(registry.clock() + Duration.seconds(3600).nanoseconds, ordering: .relaxed)
            up.withLock { $0 = true }
            #expect(await eventually { (try? answers()) == ["sick", "steady"] }, "the hour-long ejection outlived the recovery")
        }
        for server in servers { try await server.shutdown() }
    }

    @Test("a target whose answers are not valid HTTP (two conflicting lengths): a GET is retried on the other, a POST gets 502")
    func garbageFraming() async throws {
        let good = CountingBackend("good")
        let garbled = try await ScriptedBackend.start { _ in
            [.text("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello"), .close]
        }
        let server = try await BackendServer.start(handler: good.handler)
        let policy = Self.policy(
            [String(garbled.port), String(server.port)], backend: "retries: { attempts: 2, on: [reset] }\noutlierDetection: off")
        try await Self.withPool(policy) { gateway in
            for _ in 0..<4 {
                let answer = try gateway.connect().request("GET", "/api/x")
                #expect(answer.status == 200)
                #expect(answer.bodyText == "good")
            }
            var statuses: [Int] = []
            for _ in 0..<4 { statuses.append(try gateway.connect().request("POST", "/api/x", body: "once").status) }
            #expect(statuses.sorted() == [200, 200, 502, 502], "\(statuses)")
        }
        try await server.shutdown()
        try await garbled.shutdown()
    }

    @Test(
        "a target that accepts and never answers: a GET is retried on the other after its per-try timeout, a POST gets 504 and is sent once"
    )
    func silentTarget() async throws {
        let silent = try await HeldBackend.start(body: "{}")
        let good = CountingBackend("good")
        let server = try await BackendServer.start(handler: good.handler)
        let policy = Self.policy(
            [String(silent.port), String(server.port)],
            // The per-try timeout bounds the good target's attempt too: 3 s, for a loaded machine's
            // (a CI run's good attempt once took more than 1 s, and its GET got the pool's 504).
            backend: "timeout: 20s\nretries: { attempts: 2, on: [timeout], perTryTimeout: 3s }\noutlierDetection: off")
        try await Self.withPool(policy) { gateway in
            for _ in 0..<2 {
                let answer = try gateway.connect().request("GET", "/api/x")
                #expect(answer.status == 200)
                #expect(answer.bodyText == "good")
            }
            var statuses: [Int] = []
            for _ in 0..<2 { statuses.append(try gateway.connect().request("POST", "/api/x", body: "once").status) }
            #expect(statuses.sorted() == [200, 504], "\(statuses)")
            // The POST that timed out at the silent target was not sent to the other.
            #expect(good.count("POST") == 1)
        }
        silent.release()
        try await server.shutdown()
        try await silent.shutdown()
    }

    /// A resolver whose answers the test sets: a name's addresses, or nil (it does not resolve).
    final class ScriptedResolver: AddressResolver {
        let answers = Mutex<[String: [String]?]>([:])
        let lookups = Mutex(0)
        func addresses(of host: String) -> [String]? {
            lookups.withLock { $0 += 1 }
            return answers.withLock { $0[host] ?? nil }
        }
        func answer(_ host: String, _ addresses: [String]?) { answers.withLock { $0[host] = addresses } }
        /// Returns once the name has been looked up twice more (so a new answer has been seen).
        func twoMoreLookups() async -> Bool {
            let start = lookups.withLock { $0 }
            return await eventually { lookups.withLock { $0 } >= start + 2 }
        }
    }

    @Test(
        "a pool's host name is every address it resolves to, followed as the answers change; a failed or empty answer keeps the last good one"
    )
    func resolvedAddresses() async throws {
        func named(_ name: String) -> BackendServer.Handler {
            { request in
                .full(
                    status: .ok, headers: ["Content-Type": "text/plain"],
                    body: ByteBuffer(string: "\(name) \(request.headers.first(name: "host") ?? "")"))
            }
        }
        let first = try await BackendServer.start(host: "127.0.0.1", handler: named("one"))
        let second = try await BackendServer.start(host: "127.0.0.2", port: first.port, handler: named("two"))
        let resolver = ScriptedResolver()
        resolver.answer("pool.test", ["127.0.0.1"])
        let policy = """
            backends:
              pool:
                targets: [{ url: "http://pool.test:\(first.port)" }]
                resolveEvery: 100ms
                outlierDetection: off
            services:
              api: { path: /api, versions: { 1: { proxy: { backend: pool } } } }
            """
        try await Self.withPool(policy, resolver: resolver) { gateway in
            let client = try gateway.connect()
            func answers() throws -> Set<String> {
                var seen: Set<String> = []
                for _ in 0..<6 { seen.insert(try client.request("GET", "/api/x").bodyText) }
                return seen
            }
            let host = "pool.test:\(first.port)"
            #expect(try answers() == ["one \(host)"], "resolved once before the first request")
            resolver.answer("pool.test", ["127.0.0.1", "127.0.0.2"])
            #expect(await eventually { (try? answers()) == ["one \(host)", "two \(host)"] })
            resolver.answer("pool.test", nil)
            #expect(await resolver.twoMoreLookups())
            #expect(try answers() == ["one \(host)", "two \(host)"], "a failed lookup dropped the last good addresses")
            resolver.answer("pool.test", [])
            #expect(await resolver.twoMoreLookups())
            #expect(try answers() == ["one \(host)", "two \(host)"], "an empty answer dropped the last good addresses")
            resolver.answer("pool.test", ["127.0.0.2"])
            #expect(await eventually { (try? answers()) == ["two \(host)"] })
        }
        try await first.shutdown()
        try await second.shutdown()
    }
}
