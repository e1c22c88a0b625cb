import Testing

@testable import PorticoPolicy

@Suite("cache and compression in the policy")
struct CachePolicyTests: LoadsPolicyText {
    static let base = """
        listeners:
          - { name: public, port: 0 }
        backends:
          origin: { url: "http://127.0.0.1:9" }
        """

    @Test("a service's cache and compression, a version's own cache, and the top-level bounds are read")
    func read() throws {
        let snapshot = try Self.load(
            Self.base + """

                cache: { maxBytes: 64MiB, maxObjectBytes: 512KiB, maxWaiters: 100, waitTimeout: 2s }
                compression: { algorithms: [zstd, gzip], minBytes: 2KiB, levels: { gzip: 4 }, types: [application/json] }
                services:
                  weather:
                    path: /weather
                    cache: { defaultTTL: 30s, sameForEveryKey: true, staleIfError: 10m }
                    compression: { levels: { zstd: 9 } }
                    versions:
                      1: { proxy: { backend: origin } }
                      2: { proxy: { backend: origin }, cache: false }
                  raw:
                    path: /raw
                    compression: false
                    versions:
                      1: { proxy: { backend: origin }, cache: true }
                """
        ).get()
        let policy = snapshot.policy
        #expect(policy.cache?.maxBytes == 64 * 1024 * 1024)
        #expect(policy.cache?.maxObjectBytes == 512 * 1024)
        #expect(policy.cache?.maxWaiters == 100)
        #expect(policy.cache?.waitTimeout == .seconds(2))
        #expect(policy.compression?.algorithms == [.zstd, .gzip])
        #expect(policy.compression?.level(.gzip) == 4)
        #expect(policy.compression?.level(.br) == 4)
        #expect(policy.compression?.minBytes == 2048)
        let weather = try #require(policy.services["weather"])
        #expect(weather.cache == ServiceCachePolicy(defaultTTL: .seconds(30), sameForEveryKey: true, staleIfError: .seconds(600)))
        #expect(weather.versions[2]?.cache == ServiceCachePolicy(enabled: false))
        #expect(weather.compression?.levels == [.zstd: 9])
        #expect(policy.services["raw"]?.compression?.enabled == false)
        #expect(policy.services["raw"]?.versions[1]?.cache == ServiceCachePolicy())
    }

    @Test("mistakes name their key path: bounds, a Redis store without a cluster, levels, algorithms, types")
    func refused() {
        let found = Self.diagnostics(
            Self.base + """

                cache: { maxBytes: 1MiB, maxObjectBytes: 2MiB, store: disk }
                compression: { algorithms: [gzip, gzip, lz4], levels: { br: 12, gzip: 0 }, types: [json] }
                services:
                  weather:
                    path: /weather
                    cache: { defaultTTL: soon, size: 3 }
                    versions:
                      1: { proxy: { backend: origin } }
                """)
        let expected = [
            "p.yaml:5: cache.maxObjectBytes: maxObjectBytes (2097152) must not exceed maxBytes (1048576)",
            "p.yaml:5: cache.store: expected one of memory, redis, found disk",
            "p.yaml:6: compression.algorithms.1: gzip is listed twice",
            "p.yaml:6: compression.algorithms.2: expected one of br, gzip, zstd, found lz4",
            "p.yaml:6: compression.levels.br: expected an integer in 0...11, found 12",
            "p.yaml:6: compression.levels.gzip: expected an integer in 1...9, found 0",
            "p.yaml:6: compression.types.0: expected a media type such as application/json, text/* or */*+json, found \"json\"",
            "p.yaml:10: services.weather.cache.defaultTTL: expected a positive duration such as 500ms, 10s or 5m, found soon",
            "p.yaml:10: services.weather.cache.size: unknown key \"size\"; expected one of: enabled, defaultTTL, sameForEveryKey, staleWhileRevalidate, staleIfError",
        ]
        for message in expected { #expect(found.contains(message), "\(message)\nin \(found)") }
        let redis = Self.diagnostics(Self.base + "\ncache: { store: redis }\n")
        #expect(redis.contains { $0.contains("store: redis shares entries through the fleet's Redis; it needs a cluster section") })
    }
}
