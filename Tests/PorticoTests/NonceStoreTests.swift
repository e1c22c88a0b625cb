import Foundation
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

@Suite("The nonce store")
struct NonceStoreTests {
    @Test("a nonce is refused again until it expires, then accepted")
    func replayWindow() {
        let store = InMemoryNonceStore(capacity: 100, shardCount: 4)
        #expect(store.insert(keyID: "k", nonce: "n", created: 100, expiry: 110, now: 100, quota: 10) == .inserted)
        #expect(store.check(keyID: "k", nonce: "n", created: 105, now: 105) == .replayed)
        #expect(store.insert(keyID: "k", nonce: "n", created: 105, expiry: 111, now: 105, quota: 10) == .replayed)
        #expect(store.check(keyID: "other", nonce: "n", created: 105, now: 105) == nil)
        #expect(store.insert(keyID: "other", nonce: "n", created: 105, expiry: 111, now: 105, quota: 10) == .inserted)  // per key
        #expect(store.check(keyID: "k", nonce: "n", created: 110, now: 110) == nil)
        #expect(store.insert(keyID: "k", nonce: "n", created: 110, expiry: 120, now: 110, quota: 10) == .inserted)  // expired at 110
    }

    @Test("at its bound it refuses new nonces instead of forgetting live ones")
    func failsClosed() {
        let store = InMemoryNonceStore(capacity: 3, shardCount: 1)
        for index in 0..<3 {
            #expect(
                store.insert(keyID: "k", nonce: "n\(index)", created: 100, expiry: 200 + Int64(index), now: 100, quota: 10) == .inserted)
        }
        #expect(store.insert(keyID: "k", nonce: "new", created: 150, expiry: 300, now: 150, quota: 10) == .full(retryAfter: 50))
        // Every live nonce is still remembered.
        for index in 0..<3 {
            #expect(store.insert(keyID: "k", nonce: "n\(index)", created: 150, expiry: 300, now: 150, quota: 10) == .replayed)
        }
        // Once the earliest expires, exactly one slot frees up.
        #expect(store.insert(keyID: "k", nonce: "new", created: 200, expiry: 300, now: 200, quota: 10) == .inserted)
        #expect(store.insert(keyID: "k", nonce: "newer", created: 200, expiry: 300, now: 200, quota: 10) == .full(retryAfter: 1))
        #expect(store.count == 3)
    }

    @Test("a key at its quota is refused for itself only, until its own earliest nonce expires")
    func quotaPerKey() {
        let store = InMemoryNonceStore(capacity: 100, shardCount: 4)
        for index in 0..<5 {
            #expect(
                store.insert(keyID: "flood", nonce: "f\(index)", created: 100, expiry: 130 + Int64(index), now: 100, quota: 5) == .inserted)
        }
        #expect(store.insert(keyID: "flood", nonce: "f5", created: 101, expiry: 140, now: 101, quota: 5) == .quotaExceeded(retryAfter: 29))
        #expect(store.count(keyID: "flood") == 5)
        // Others still get in, up to their own quota.
        for index in 0..<5 {
            #expect(store.insert(keyID: "honest", nonce: "h\(index)", created: 101, expiry: 140, now: 101, quota: 5) == .inserted)
        }
        // A replay is still a replay, not a quota refusal.
        #expect(store.insert(keyID: "flood", nonce: "f0", created: 101, expiry: 140, now: 101, quota: 5) == .replayed)
        // The flood key's earliest nonce expires at 130: one slot frees for it.
        #expect(store.insert(keyID: "flood", nonce: "f5", created: 130, expiry: 160, now: 130, quota: 5) == .inserted)
        #expect(store.insert(keyID: "flood", nonce: "f6", created: 130, expiry: 160, now: 130, quota: 5) == .quotaExceeded(retryAfter: 1))
    }

    @Test("a nonce that finds no room marks its key: that signature and the key's older ones stay refused once room frees; newer ones pass")
    func refusalMarkForQuota() {
        let store = InMemoryNonceStore(capacity: 100, shardCount: 4)
        #expect(store.insert(keyID: "k", nonce: "a", created: 100, expiry: 110, now: 100, quota: 2) == .inserted)
        #expect(store.insert(keyID: "k", nonce: "b", created: 101, expiry: 111, now: 101, quota: 2) == .inserted)
        #expect(store.insert(keyID: "k", nonce: "c", created: 102, expiry: 112, now: 102, quota: 2) == .quotaExceeded(retryAfter: 8))
        // At 110, "a" has expired and there is room, but the refused signature stays refused, as
        // does any other of this key created at or before it.
        #expect(store.check(keyID: "k", nonce: "c", created: 102, now: 110) == .quotaExceeded(retryAfter: 1))
        #expect(store.insert(keyID: "k", nonce: "c", created: 102, expiry: 112, now: 110, quota: 2) == .quotaExceeded(retryAfter: 1))
        #expect(store.insert(keyID: "k", nonce: "x", created: 101, expiry: 111, now: 110, quota: 2) == .quotaExceeded(retryAfter: 1))
        // A newer signature takes the room; another key was never affected.
        #expect(store.insert(keyID: "k", nonce: "d", created: 103, expiry: 113, now: 110, quota: 2) == .inserted)
        #expect(store.insert(keyID: "other", nonce: "c", created: 102, expiry: 112, now: 110, quota: 2) == .inserted)
        // Past the refused signature's expiry the mark is gone: it could not be accepted anyway.
        #expect(store.check(keyID: "k", nonce: "c", created: 102, now: 112) == nil)
    }

    @Test("a nonce a full store cannot take marks its key the same way, answered as the store being full")
    func refusalMarkForFullStore() {
        let store = InMemoryNonceStore(capacity: 2, shardCount: 1)
        #expect(store.insert(keyID: "a", nonce: "1", created: 100, expiry: 110, now: 100, quota: 5) == .inserted)
        #expect(store.insert(keyID: "b", nonce: "1", created: 100, expiry: 120, now: 100, quota: 5) == .inserted)
        #expect(store.insert(keyID: "c", nonce: "1", created: 101, expiry: 111, now: 101, quota: 5) == .full(retryAfter: 9))
        #expect(store.check(keyID: "c", nonce: "2", created: 101, now: 101) == .full(retryAfter: 9))
        // At 110 there is room again: the refused signature does not get in; a newer one of c does.
        #expect(store.insert(keyID: "c", nonce: "1", created: 101, expiry: 111, now: 110, quota: 5) == .full(retryAfter: 1))
        #expect(store.insert(keyID: "c", nonce: "3", created: 110, expiry: 120, now: 110, quota: 5) == .inserted)
    }

    @Test("one key may use more than one shard's share of the store, up to the whole bound")
    func capacityIsShared() {
        let store = InMemoryNonceStore(capacity: 64, shardCount: 16)
        for index in 0..<64 {
            #expect(store.insert(keyID: "busy", nonce: "n\(index)", created: 100, expiry: 200, now: 100, quota: 1000) == .inserted)
        }
        #expect(store.insert(keyID: "busy", nonce: "more", created: 100, expiry: 200, now: 100, quota: 1000) == .full(retryAfter: 100))
        #expect(store.insert(keyID: "other", nonce: "x", created: 100, expiry: 200, now: 100, quota: 1000) == .full(retryAfter: 100))
        #expect(store.count == 64)
    }

    @Test("when full, expired nonces of keys that went quiet are swept before anyone is refused")
    func sweepsQuietKeys() {
        let store = InMemoryNonceStore(capacity: 40, shardCount: 16)
        // Twenty quiet keys, two nonces each, all expired by 150; their shards are never written
        // again. None shares the new key's shard (shards follow the run's hash seed), whose own
        // purge would otherwise free room without any sweep.
        let quiet = (0...).lazy.map { "quiet-\($0)" }.filter { store.shardIndex(for: $0) != store.shardIndex(for: "new") }.prefix(20)
        for key in quiet {
            for index in 0..<2 {
                #expect(store.insert(keyID: key, nonce: "n\(index)", created: 100, expiry: 150, now: 100, quota: 10) == .inserted)
            }
        }
        #expect(store.count == 40)
        // A new key finds room once the expired entries are swept, wherever they are.
        for index in 0..<10 {
            #expect(store.insert(keyID: "new", nonce: "n\(index)", created: 200, expiry: 300, now: 200, quota: 10) == .inserted)
        }
        #expect(store.count == 10)
    }

    @Test("expired entries are cleared, so memory follows the live set")
    func memoryIsBounded() {
        let store = InMemoryNonceStore(capacity: 1000, shardCount: 8)
        for second in Int64(0)..<100 {
            for index in 0..<50 {
                #expect(
                    store.insert(keyID: "k", nonce: "\(second)-\(index)", created: second, expiry: second + 5, now: second, quota: 1000)
                        == .inserted)
            }
        }
        #expect(store.count <= 6 * 50)
    }

    @Test("concurrent inserts of one nonce admit exactly one")
    func concurrentInserts() async {
        let store = InMemoryNonceStore(capacity: 10_000)
        let results = await withTaskGroup(of: NonceInsertion.self) { group in
            for _ in 0..<64 { group.addTask { store.insert(keyID: "k", nonce: "same", created: 100, expiry: 200, now: 100, quota: 100) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { $0 == .inserted }.count == 1)
        #expect(results.filter { $0 == .replayed }.count == 63)
    }

    @Test("concurrent inserts never take more than the store holds")
    func concurrentCapacity() async {
        let store = InMemoryNonceStore(capacity: 100)
        let inserted = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    (0..<50).filter {
                        store.insert(keyID: "k\(task)", nonce: "n\($0)", created: 100, expiry: 200, now: 100, quota: 1000) == .inserted
                    }
                    .count
                }
            }
            return await group.reduce(0, +)
        }
        #expect(inserted == 100)
        #expect(store.count == 100)
    }

    @Test("a key's share: a tier's nonceQuota, else what its limits admit while a nonce lives, else the default")
    func quotas() throws {
        let snapshot = try TestGateway.snapshot(
            policy: """
                signatures: { maxClockSkew: 10s, nonceCacheSize: 100000 }
                backends: { b: { url: "http://127.0.0.1:9" } }
                services:
                  one: { path: /one, auth: signature, versions: { 1: { proxy: { backend: b } } } }
                  two: { path: /two, auth: signature, versions: { 1: { proxy: { backend: b } } } }
                  open: { path: /open, versions: { 1: { proxy: { backend: b } } } }
                tiers:
                  derived: { rate: 5/s, burst: 7, services: { two: { rate: 60/m, burst: 2 } } }
                  explicit: { rate: 5/s, nonceQuota: 40 }
                keys:
                  a: { secret: "a-secret-0123456789abcdefghijklmnopqrstuv", demo: true, services: ["*"], tier: derived }
                  b: { secret: "b-secret-0123456789abcdefghijklmnopqrstuv", demo: true, services: [one], tier: derived }
                  c: { secret: "c-secret-0123456789abcdefghijklmnopqrstuv", demo: true, services: ["*"], tier: explicit }
                  d: { secret: "d-secret-0123456789abcdefghijklmnopqrstuv", demo: true, services: ["*"] }
                """)
        let policy = snapshot.policy
        // A nonce lives at most 2 × 10 + 1 = 21 s: service one admits 7 + 5 × 21, service two 2 + 21.
        #expect(policy.nonceQuota(for: policy.keys["a"]!) == 7 + 105 + 2 + 21)
        #expect(policy.nonceQuota(for: policy.keys["b"]!) == 7 + 105)
        #expect(policy.nonceQuota(for: policy.keys["c"]!) == 40)
        #expect(policy.nonceQuota(for: policy.keys["d"]!) == 10_000)
    }

    @Test("through the gateway, a full nonce cache answers 503 with Retry-After and never admits a replay")
    func fullCacheThroughGateway() async throws {
        let secret = SignatureAuthTests.appSecret
        let policy: ([Int]) -> String = { ports in
            """
            signatures: { nonceCacheSize: 16, defaultNonceQuota: 8 }
            backends:
              echo: { url: "http://127.0.0.1:\(ports[0])" }
            services:
              signed: { path: /signed, auth: signature, versions: { 1: { proxy: { backend: echo } } } }
            keys:
              app-one: { secret: "\(secret)", demo: true, services: ["*"] }
              app-two: { secret: "\(secret)", demo: true, services: ["*"] }
              app-three: { secret: "\(secret)", demo: true, services: ["*"] }
            """
        }
        try await withGateway(policy: policy) { gateway, _ in
            let client = try gateway.connect()
            var accepted: [[(String, String)]] = []
            // Two keys take their whole shares: together, the whole store.
            for key in ["app-one", "app-two"] {
                let signer = TestSigner(keyID: key, secret: secret)
                for index in 0..<8 {
                    let headers = try signer.headers("GET", "/signed/a", nonce: "nonce-\(index)")
                    #expect(try client.request("GET", "/signed/a", headers: headers).status == 200)
                    accepted.append(headers)
                }
            }
            // A third key finds the store full of live nonces.
            let third = TestSigner(keyID: "app-three", secret: secret)
            for index in 0..<8 {
                let response = try client.request("GET", "/signed/a", headers: try third.headers("GET", "/signed/a", nonce: "n-\(index)"))
                #expect(response.status == 503)
                #expect(response.json?["type"] as? String == "urn:portico:problem:replay-cache-full")
                let retryAfter = try #require(Int(response.header("Retry-After") ?? ""))
                #expect(retryAfter > 0 && retryAfter <= 601)
            }
            // Every accepted nonce is still remembered.
            for headers in accepted {
                #expect(try client.request("GET", "/signed/a", headers: headers).status == 401)
            }
        }
    }

    static func floodPolicy(floodTier: String?) -> ([Int]) -> String {
        { ports in
            """
            signatures: { nonceCacheSize: 300 }
            backends:
              echo: { url: "http://127.0.0.1:\(ports[0])" }
            services:
              signed: { path: /signed, auth: signature, versions: { 1: { proxy: { backend: echo } } } }
            tiers:
              slow: { rate: 5/s, burst: 5, nonceQuota: 30 }
              standard: { rate: 100/s, burst: 50 }
            keys:
              flood: { secret: "\(SignatureAuthTests.appSecret)", demo: true, services: ["*"]\(floodTier.map { ", tier: \($0)" } ?? "") }
              honest: { secret: "\(SignatureAuthTests.appSecret)", demo: true, services: ["*"], tier: standard }
            """
        }
    }

    /// One key floods with genuinely signed requests (fresh nonces) on one connection while
    /// another key calls on its own; the other key must keep getting 200s.
    /// `admitted` is how many of the flood's 400 requests its tier (on a clock that stands still)
    /// or its share of the store lets through.
    func flood(gateway: TestGateway, refusal: (status: Int, types: Set<String>), admitted: Int) throws {
        let flooder = TestSigner(keyID: "flood", secret: SignatureAuthTests.appSecret)
        let honest = TestSigner(keyID: "honest", secret: SignatureAuthTests.appSecret)
        let floodClient = try gateway.connect()
        let honestClient = try gateway.connect()
        var refused = 0
        for round in 0..<400 {
            let response = try floodClient.request("GET", "/signed/f", headers: try flooder.headers("GET", "/signed/f"))
            if response.status != 200 {
                #expect(response.status == refusal.status)
                #expect(refusal.types.map { "urn:portico:problem:" + $0 }.contains(response.json?["type"] as? String ?? ""))
                #expect(response.header("Retry-After") != nil)
                refused += 1
            }
            if round % 20 == 19 {
                let answer = try honestClient.request("GET", "/signed/h", headers: try honest.headers("GET", "/signed/h"))
                #expect(answer.status == 200, "round \(round): \(answer.status) \(answer.bodyText)")
            }
        }
        // The flood was refused for itself: all but what its bucket or its share allowed.
        #expect(refused == 400 - admitted)
    }

    @Test("a key flooding signed requests is stopped by its own rate limit; the refused requests' nonces take its own share only")
    func floodStoppedByRateLimit() async throws {
        // The limiter's clock stands still, so the tier admits exactly its burst of 5. The refused
        // requests' nonces are kept too, up to the key's share (30); past it the key is refused
        // as over its share, and the honest key never notices.
        let limiter = RateLimiter(clock: { 0 })
        try await withGateway(rateLimiter: limiter, policy: Self.floodPolicy(floodTier: "slow")) { gateway, _ in
            try flood(gateway: gateway, refusal: (429, ["rate-limited", "replay-quota-exceeded"]), admitted: 5)
        }
    }

    @Test("a key with no rate limit flooding signed requests is held to its share of the nonce store")
    func floodHeldToQuota() async throws {
        // No tier: a tenth of the 300-nonce store, 30.
        try await withGateway(policy: Self.floodPolicy(floodTier: nil)) { gateway, _ in
            try flood(gateway: gateway, refusal: (429, ["replay-quota-exceeded"]), admitted: 30)
        }
    }
}
