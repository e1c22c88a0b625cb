import Testing

@testable import PorticoPolicy

@Suite("Rate-limit policy")
struct RateLimitPolicyTests {
    static let head = """
        listeners: [{ name: public, port: 8080 }]
        backends:
          quotes: { url: "http://127.0.0.1:18081", rateLimit: { rate: 200/s, burst: 50 }, maxConcurrent: 64 }
        services:
          stockQuote: { path: /q, auth: apiKey, versions: { 1: { proxy: { backend: quotes } } } }
          open: { path: /open, addressRateLimit: { rate: 600/m }, versions: { 1: { proxy: { backend: quotes } } } }

        """

    @Test("backends, services, tiers and keys read into the policy, burst defaulting to one period's worth")
    func reads() throws {
        let snapshot = try PolicyLoader().load(sources: [
            (
                file: "p.yaml",
                text: Self.head + """
                    tiers:
                      standard: { rate: 50/s, burst: 20, services: { stockQuote: { rate: 10/s } } }
                      partner: { rate: 10000/h, burst: 100 }
                    keys:
                      app: { secret: "app-secret-0123456789abcdefghijklmnopqrstuvwxyz", demo: true, services: ["*"], tier: standard }
                    """
            )
        ])
        let policy = snapshot.policy
        #expect(policy.backends["quotes"]?.rateLimit == RateLimitPolicy(count: 200, period: .seconds(1), burst: 50))
        #expect(policy.backends["quotes"]?.maxConcurrent == 64)
        #expect(policy.services["open"]?.addressRateLimit == RateLimitPolicy(count: 600, period: .seconds(60), burst: 600))
        let standard = try #require(policy.tiers["standard"])
        #expect(standard.limit(for: "stockQuote") == RateLimitPolicy(count: 10, period: .seconds(1), burst: 10))
        #expect(standard.limit(for: "open") == RateLimitPolicy(count: 50, period: .seconds(1), burst: 20))
        #expect(policy.tiers["partner"]?.limit.description == "10000/h burst 100")
        #expect(policy.keys["app"]?.tier == "standard")
    }

    @Test("each mistake is named with its file, line and key path")
    func mistakes() {
        let text =
            Self.head + """
                tiers:
                  standard: { rate: 50/fortnight, burst: 0 }
                  gold: { burst: 3, services: { nowhere: { rate: 1/s } } }
                  bronze: { rate: 0/s }
                keys:
                  app: { secret: "app-secret-0123456789abcdefghijklmnopqrstuvwxyz", demo: true, services: ["*"], tier: platinum }
                """
        var diagnostics: [String] = []
        do {
            _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: text)])
        } catch {
            diagnostics = error.diagnostics.map(\.description)
        }
        let expected = [
            "p.yaml:8: tiers.standard.rate: expected a rate such as 50/s, 600/m or 10000/h (1 to 1000000000 requests), found 50/fortnight",
            "p.yaml:8: tiers.standard.burst: expected an integer in 1...1000000, found 0",
            "p.yaml:9: tiers.gold: missing required key \"rate\"",
            "p.yaml:9: tiers.gold.services.nowhere: unknown service \"nowhere\"; expected one of: open, stockQuote",
            "p.yaml:10: tiers.bronze.rate: expected a rate such as 50/s, 600/m or 10000/h (1 to 1000000000 requests), found 0/s",
            "p.yaml:12: keys.app.tier: unknown tier \"platinum\"; expected one of: bronze, gold, standard",
        ]
        #expect(diagnostics == expected)
    }

    @Test("a backend's maxConcurrent must be positive; an address limit on a keyed service is a warning")
    func backendAndServiceChecks() throws {
        let broken = """
            listeners: [{ name: public, port: 8080 }]
            backends: { b: { url: "http://127.0.0.1:1", maxConcurrent: 0, rateLimit: { rate: 5/s, brust: 2 } } }
            services: { s: { path: /s, versions: { 1: { proxy: { backend: b } } } } }
            """
        #expect(throws: PolicyError.self) { try PolicyLoader().load(sources: [(file: "p.yaml", text: broken)]) }
        do {
            _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: broken)])
        } catch {
            #expect(
                error.diagnostics.map(\.description) == [
                    "p.yaml:2: backends.b.rateLimit.brust: unknown key \"brust\"; expected one of: rate, burst",
                    "p.yaml:2: backends.b.maxConcurrent: expected an integer in 1...1000000, found 0",
                ])
        }
        let warned = try PolicyLoader().load(sources: [
            (
                file: "p.yaml",
                text: """
                listeners: [{ name: public, port: 8080 }]
                backends: { b: { url: "http://127.0.0.1:1" } }
                services: { s: { path: /s, auth: signature, addressRateLimit: { rate: 5/s }, versions: { 1: { proxy: { backend: b } } } } }
                """
            )
        ])
        #expect(
            warned.warnings.map(\.description).contains {
                $0.contains("services.s.addressRateLimit: applies to unauthenticated requests only")
            })
    }

    @Test("a tier that lets one key hold the whole nonce store is a warning; nonceQuota must be positive")
    func nonceShares() throws {
        func load(_ tiers: String) throws -> PolicySnapshot {
            try PolicyLoader().load(sources: [
                (
                    file: "p.yaml",
                    text: """
                    listeners: [{ name: public, port: 8080 }]
                    signatures: { nonceCacheSize: 1000 }
                    backends: { b: { url: "http://127.0.0.1:1" } }
                    services: { s: { path: /s, auth: signature, versions: { 1: { proxy: { backend: b } } } } }
                    tiers: \(tiers)
                    keys: { k: { secret: "k-secret-0123456789abcdefghijklmnopqrstuv", demo: true, services: ["*"], tier: t } }
                    """
                )
            ])
        }
        // 10/s for 601 s is 6010 nonces: more than the store.
        let generous = try load("{ t: { rate: 10/s } }")
        #expect(
            generous.warnings.map(\.description).contains {
                $0.hasPrefix("p.yaml:5: tiers.t: one key of this tier may hold the whole nonce store (its limits admit")
            })
        let bounded = try load("{ t: { rate: 10/s, nonceQuota: 100 } }")
        #expect(!bounded.warnings.map(\.description).contains { $0.contains("nonce store") })
        #expect(bounded.policy.nonceQuota(for: bounded.policy.keys["k"]!) == 100)
        #expect(throws: PolicyError.self) { try load("{ t: { rate: 10/s, nonceQuota: 0 } }") }
    }
}
