import Foundation
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import PorticoRedis
import PorticoRedisTesting
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

/// The cache in fleet mode, against a real `redis-server`: shared entries (`store: redis`),
/// purges that reach every gateway, and a Redis that fails.
@Suite("The response cache in fleet mode", .enabled(if: RedisServerProcess.isInstalled), .serialized)
struct FleetCacheTests {
    static func policy(origin: Int, redis: Int, store: String) -> String {
        """
        cluster: { redis: "redis://127.0.0.1:\(redis)", timeout: 5s, onFailure: { limits: local } }
        cache: { store: \(store), maxObjectBytes: 64KiB }
        backends:
          origin: { url: "http://127.0.0.1:\(origin)", timeout: 5s }
        services:
          weather:
            path: /weather
            cache: { defaultTTL: 30s }
            versions:
              1: { proxy: { backend: origin } }
        """
    }

    /// Two gateways on one Redis, in front of one origin.
    func withFleet(store: String, _ body: (TestGateway, TestGateway, CacheOrigin, RedisServerProcess) async throws -> Void) async throws {
        let redis = try RedisServerProcess()
        let origin = CacheOrigin()
        let backend = try await BackendServer.start(handler: origin.handler)
        let first = try await TestGateway.start(policy: Self.policy(origin: backend.port, redis: redis.port, store: store))
        let second = try await TestGateway.start(policy: Self.policy(origin: backend.port, redis: redis.port, store: store))
        do {
            try await body(first, second, origin, redis)
        } catch {
            await first.shutdown()
            await second.shutdown()
            try await backend.shutdown()
            throw error
        }
        await first.shutdown()
        await second.shutdown()
        try await backend.shutdown()
    }

    @Test("with store: redis, what one gateway stores the other serves without asking the backend")
    func sharedEntries() async throws {
        try await withFleet(store: "redis") { first, second, origin, redis in
            origin.answer(
                "/weather/oslo", headers: [("Cache-Control", "max-age=60"), ("ETag", #""o1""#), ("Surrogate-Key", "north")], body: "[1]")
            let stored = try first.connect().request("GET", "/weather/oslo")
            #expect(stored.header("Cache-Status") == "Portico; fwd=miss; fwd-status=200; stored")
            let key = FleetCache.entryKey(CacheKey(service: "weather", target: "/weather/oslo"), version: 1)
            #expect(await eventually { (try? redis.command(["EXISTS", key]))?.integer == 1 })
            let shared = try second.connect().request("GET", "/weather/oslo")
            #expect(shared.status == 200)
            #expect(shared.bodyText == "[1]")
            #expect(shared.header("Cache-Status") == "Portico; hit")
            #expect(shared.header("ETag") == #""o1""#)
            #expect(origin.count("/weather/oslo") == 1)
            // A purge by tag on one gateway empties Redis and, through the stream, the other's memory.
            let admin = AdminAPI(gateway: first.gateway, reloader: nil, boundAddress: "127.0.0.1")
            let purge = await admin.respond(method: .POST, uri: "/admin/cache/purge?tag=north", authorization: nil)
            #expect(purge.status == .ok)
            #expect((try? redis.command(["EXISTS", key]))?.integer == 0)
            #expect(await eventually { second.gateway.cache.usage.entries == 0 })
            #expect(try second.connect().request("GET", "/weather/oslo").header("Cache-Status")?.hasPrefix("Portico; fwd=miss") == true)
            #expect(origin.count("/weather/oslo") == 2)
        }
    }

    @Test("with store: memory, each gateway keeps its own entries, and a purge or an unsafe request still reaches every one")
    func purgesReachEveryGateway() async throws {
        try await withFleet(store: "memory") { first, second, origin, _ in
            origin.answer("/weather/rome", headers: [("Cache-Control", "max-age=60")], body: "[2]")
            for gateway in [first, second] {
                _ = try gateway.connect().request("GET", "/weather/rome")
                #expect(try gateway.connect().request("GET", "/weather/rome").header("Cache-Status") == "Portico; hit")
            }
            #expect(origin.count("/weather/rome") == 2)
            let post = try first.connect().request("POST", "/weather/rome", body: "{}")
            #expect(post.status == 200)
            #expect(await eventually { second.gateway.cache.usage.entries == 0 })
            #expect(first.gateway.cache.usage.entries == 0)
        }
    }

    @Test("a Redis that is down fails no request: the gateway goes on with its own memory and the backend")
    func redisDown() async throws {
        try await withFleet(store: "redis") { first, _, origin, redis in
            origin.answer("/weather/lima", headers: [("Cache-Control", "max-age=60")], body: "[3]")
            redis.stop()
            let miss = try first.connect().request("GET", "/weather/lima")
            #expect(miss.status == 200)
            #expect(miss.bodyText == "[3]")
            let hit = try first.connect().request("GET", "/weather/lima")
            #expect(hit.status == 200)
            #expect(hit.header("Cache-Status") == "Portico; hit")
            #expect(origin.count("/weather/lima") == 1)
        }
    }

    @Test("an entry reads back from its bytes exactly; bytes of another shape are no entry")
    func encoding() throws {
        let entry = CacheParsingTests.entry(
            "/e", body: 10, headers: [("Cache-Control", "max-age=60, stale-if-error=30"), ("Vary", "Accept-Language"), ("ETag", #""x""#)],
            request: .init([("Accept-Language", "fr")]))
        let decoded = try #require(CachedResponse.decode(entry.encoded(), key: entry.key, version: 1))
        #expect(decoded.headers == entry.headers)
        #expect(decoded.body == entry.body)
        #expect(decoded.age(at: 1030) == entry.age(at: 1030))
        #expect(decoded.freshnessLifetime == entry.freshnessLifetime)
        #expect(decoded.staleIfError == 30)
        #expect(decoded.varyNames == ["accept-language"])
        #expect(decoded.varyValues == ["fr"])
        var cut = entry.encoded()
        cut.moveWriterIndex(to: cut.writerIndex - 1)
        #expect(CachedResponse.decode(cut, key: entry.key, version: 1) == nil)
        #expect(CachedResponse.decode(ByteBuffer(string: "not an entry"), key: entry.key, version: 1) == nil)
        // What Redis hands back is a peer's bytes: a field name no parser would take is no entry
        // (HTTPHeaders traps on a name that is not ASCII).
        let forged = CacheParsingTests.entry("/e", headers: [("X-Caf\u{e9}", "1")], request: .init())
        #expect(CachedResponse.decode(forged.encoded(), key: forged.key, version: 1) == nil)
    }
}
