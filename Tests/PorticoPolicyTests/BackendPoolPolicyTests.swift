import Testing

@testable import PorticoPolicy

@Suite("Backend pools in the policy: targets, balancing, outlier detection, retries")
struct BackendPoolPolicyTests {
    static func load(_ backends: String) -> Result<PolicySnapshot, PolicyError> {
        let text = "listeners:\n  - { name: public, port: 0 }\nbackends:\n" + backends
        return Result { () throws(PolicyError) in try PolicyLoader().load(sources: [(file: "p.yaml", text: text)]) }
    }

    static func errors(_ backends: String) -> [String] {
        switch load(backends) {
        case .success: []
        case .failure(let error): error.diagnostics.map(\.description)
        }
    }

    @Test("targets with weights, a balance mode, a hash key, outlier detection and retries are read as written")
    func pool() throws {
        let snapshot = try Self.load(
            """
              quotes:
                targets:
                  - { url: "http://10.0.0.11:8080/v1", weight: 2 }
                  - { url: "http://10.0.0.12:8080/v1/" }
                balance: hash
                hashOn: header:X-Tenant
                maxConcurrentPerTarget: 50
                healthCheck: { path: /healthz, interval: 2s, timeout: 1s, healthyAfter: 3, unhealthyAfter: 1, expectStatus: [200, 3xx] }
                outlierDetection: { consecutiveFailures: 3, ejectFor: 20s, maxEjectedPercent: 34% }
                retries: { attempts: 3, on: [connect-failure, reset, 503], perTryTimeout: 500ms, budget: 25%, methods: [GET, PUT] }
              single: { url: "http://127.0.0.1:9" }
              quiet:
                targets: [{ url: "http://127.0.0.1:1" }, { url: "http://127.0.0.1:2" }]
                outlierDetection: off
            """
        ).get()
        let quotes = try #require(snapshot.backend(named: "quotes"))
        #expect(quotes.targets.map(\.url.description) == ["http://10.0.0.11:8080/v1", "http://10.0.0.12:8080/v1"])
        #expect(quotes.targets.map(\.weight) == [2, 1])
        #expect(quotes.balance == .hash)
        #expect(quotes.hashOn == .header("x-tenant"))
        #expect(quotes.maxConcurrentPerTarget == 50)
        let check = try #require(quotes.healthCheck)
        #expect(check.path == "/healthz" && check.interval == .seconds(2) && check.timeout == .seconds(1))
        #expect(check.healthyAfter == 3 && check.unhealthyAfter == 1)
        #expect(check.expectStatus == [200...200, 300...399])
        #expect(quotes.outlierDetection?.consecutiveFailures == 3)
        #expect(quotes.outlierDetection?.ejectFor == .seconds(20))
        #expect(quotes.outlierDetection?.maxEjectedPercent == 34)
        let retries = try #require(quotes.retries)
        #expect(retries.attempts == 3)
        #expect(retries.on == [.connectFailure, .reset, .status503])
        #expect(retries.perTryTimeout == .milliseconds(500))
        #expect(retries.budgetPercent == 25)
        #expect(retries.methods == ["GET", "PUT"])

        let single = try #require(snapshot.backend(named: "single"))
        #expect(single.targets.count == 1)
        #expect(single.balance == .roundRobin)
        #expect(single.outlierDetection == nil, "one target: nothing to eject it in favour of")
        #expect(single.retries == nil)
        #expect(try #require(snapshot.backend(named: "quiet")).outlierDetection == nil)
    }

    @Test("a backend of several targets detects outliers by default; its retries default to the idempotent methods")
    func defaults() throws {
        let snapshot = try Self.load(
            """
              pair:
                targets: [{ url: "http://127.0.0.1:1" }, { url: "http://127.0.0.1:2" }]
                retries: { attempts: 2, on: [connect-failure] }
            """
        ).get()
        let pair = try #require(snapshot.backend(named: "pair"))
        #expect(pair.outlierDetection == OutlierDetectionPolicy())
        #expect(pair.retries?.methods == ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"])
        #expect(pair.retries?.budgetPercent == 20)
    }

    @Test("weights out of range, a duplicate target, mixed schemes or paths, url with targets are refused naming file and key path")
    func refusedTargets() {
        let errors = Self.errors(
            """
              zero:
                targets: [{ url: "http://127.0.0.1:1", weight: 0 }, { url: "http://127.0.0.1:2" }]
              twice:
                targets: [{ url: "http://127.0.0.1:1" }, { url: "http://127.0.0.1:1/" }]
              mixed:
                targets: [{ url: "http://127.0.0.1:1" }, { url: "https://127.0.0.1:2" }]
              paths:
                targets: [{ url: "http://127.0.0.1:1/a" }, { url: "http://127.0.0.1:2/b" }]
              both: { url: "http://127.0.0.1:1", targets: [{ url: "http://127.0.0.1:2" }] }
              none: { timeout: 1s }
              empty: { targets: [] }
            """)
        let expected = [
            "p.yaml:5: backends.zero.targets.0.weight: expected an integer in 1...1000",
            "p.yaml:7: backends.twice.targets.1: http://127.0.0.1:1 is already a target of this backend",
            "p.yaml:9: backends.mixed.targets.1: every target of a backend has the same scheme and path",
            "p.yaml:11: backends.paths.targets.1: every target of a backend has the same scheme and path",
            "p.yaml:12: backends.both: expected url (one target) or targets (several), not both",
            "p.yaml:13: backends.none: missing required key \"url\" (or \"targets\")",
            "p.yaml:14: backends.empty.targets: expected at least one target",
        ]
        for prefix in expected {
            #expect(errors.contains { $0.hasPrefix(prefix) }, "\(prefix) not among \(errors)")
        }
    }

    @Test("an unknown balance, hashOn without hash, and retries that could apply a write twice are refused")
    func refusedSettings() {
        let errors = Self.errors(
            """
              odd: { url: "http://127.0.0.1:1", balance: random }
              unhashed: { url: "http://127.0.0.1:1", hashOn: address }
              writes:
                url: "http://127.0.0.1:1"
                retries: { attempts: 2, on: [timeout], methods: [GET, POST] }
              slow:
                url: "http://127.0.0.1:1"
                timeout: 1s
                retries: { attempts: 9, on: [teapot], perTryTimeout: 2s }
              badHeader: { url: "http://127.0.0.1:1", balance: hash, hashOn: "header:" }
            """)
        let expected = [
            "p.yaml:4: backends.odd.balance: expected one of roundRobin, leastRequest, hash, found random",
            "p.yaml:5: backends.unhashed.hashOn: hashOn applies to balance: hash only",
            "p.yaml:8: backends.writes.retries.methods.1: POST is not idempotent",
            "p.yaml:12: backends.slow.retries.attempts: expected an integer in 2...5",
            "p.yaml:12: backends.slow.retries.on.0: expected one of connect-failure, reset, timeout, 502, 503, 504, found teapot",
            "p.yaml:12: backends.slow.retries.perTryTimeout: expected a time no longer than the backend's timeout",
            "p.yaml:13: backends.badHeader.hashOn: expected key, address or header:NAME",
        ]
        for prefix in expected {
            #expect(errors.contains { $0.hasPrefix(prefix) }, "\(prefix) not among \(errors)")
        }
    }

    @Test("retries that can never happen are warned about; a target written twice in other letter cases is a duplicate")
    func warningsAndCase() throws {
        let snapshot = try Self.load(
            """
              single:
                url: "http://127.0.0.1:1"
                retries: { attempts: 2, on: [connect-failure] }
              untimed:
                targets: [{ url: "http://127.0.0.1:1" }, { url: "http://127.0.0.1:2" }]
                retries: { attempts: 2, on: [timeout] }
            """
        ).get()
        let warnings = snapshot.warnings.map(\.description)
        #expect(
            warnings.contains { $0.hasPrefix("p.yaml:6: backends.single.retries: retries go to another target, and this backend has one") })
        #expect(warnings.contains { $0.hasPrefix("p.yaml:9: backends.untimed.retries: a timeout is retried only when perTryTimeout") })
        let errors = Self.errors(
            """
              twice:
                targets: [{ url: "http://Quotes.internal:8080" }, { url: "http://quotes.INTERNAL:8080" }]
            """)
        #expect(errors.contains { $0.contains("backends.twice.targets.1: http://quotes.INTERNAL:8080 is already a target") }, "\(errors)")
    }

    @Test("a pool's names are resolved every 30 s by default, a single url's not unless asked; off and out-of-range values")
    func resolveEvery() throws {
        let snapshot = try Self.load(
            """
              pool: { targets: [{ url: "http://a.internal:1" }, { url: "http://b.internal:1" }] }
              single: { url: "http://a.internal:1" }
              asked: { url: "http://a.internal:1", resolveEvery: 5s }
              quiet: { targets: [{ url: "http://a.internal:1" }], resolveEvery: off }
            """
        ).get()
        #expect(snapshot.backend(named: "pool")?.resolveEvery == .seconds(30))
        #expect(snapshot.backend(named: "single")?.resolveEvery == nil)
        #expect(snapshot.backend(named: "asked")?.resolveEvery == .seconds(5))
        #expect(snapshot.backend(named: "quiet")?.resolveEvery == nil)
        let errors = Self.errors("  fast: { url: \"http://a.internal:1\", resolveEvery: 10ms }\n")
        #expect(
            errors.contains { $0.hasPrefix("p.yaml:4: backends.fast.resolveEvery: expected off or between 100ms and 24h") }, "\(errors)")
    }
}
