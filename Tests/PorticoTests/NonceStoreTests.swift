import Foundation
import PorticoPolicy
import Testing

@testable import Portico

@Suite("The nonce store")
struct NonceStoreTests {
    @Test("a nonce is refused again until it expires, then accepted")
    func replayWindow() {
        let store = InMemoryNonceStore(capacity: 100, shardCount: 4)
        #expect(store.insert(keyID: "k", nonce: "n", expiry: 110, now: 100, quota: 10) == .inserted)
        #expect(store.contains(keyID: "k", nonce: "n", now: 105))
        #expect(store.insert(keyID: "k", nonce: "n", expiry: 111, now: 105, quota: 10) == .replayed)
        #expect(!store.contains(keyID: "other", nonce: "n", now: 105))
        #expect(store.insert(keyID: "other", nonce: "n", expiry: 111, now: 105, quota: 10) == .inserted)  // per key
        #expect(!store.contains(keyID: "k", nonce: "n", now: 110))
        #expect(store.insert(keyID: "k", nonce: "n", expiry: 120, now: 110, quota: 10) == .inserted)  // expired at 110
    }

    @Test("at its bound it refuses new nonces instead of forgetting live ones")
    func failsClosed() {
        let store = InMemoryNonceStore(capacity: 3, shardCount: 1)
        for index in 0..<3 {
            #expect(store.insert(keyID: "k", nonce: "n\(index)", expiry: 200 + Int64(index), now: 100, quota: 10) == .inserted)
        }
        #expect(store.insert(keyID: "k", nonce: "new", expiry: 300, now: 150, quota: 10) == .full(retryAfter: 50))
        // Every live nonce is still remembered.
        for index in 0..<3 {
            #expect(store.insert(keyID: "k", nonce: "n\(index)", expiry: 300, now: 150, quota: 10) == .replayed)
        }
        // Once the earliest expires, exactly one slot frees up.
        #expect(store.insert(keyID: "k", nonce: "new", expiry: 300, now: 200, quota: 10) == .inserted)
        #expect(store.insert(keyID: "k", nonce: "newer", expiry: 300, now: 200, quota: 10) == .full(retryAfter: 1))
        #expect(store.count == 3)
    }

    @Test("a key at its quota is refused for itself only, until its own earliest nonce expires")
    func quotaPerKey() {
        let store = InMemoryNonceStore(capacity: 100, shardCount: 4)
        for index in 0..<5 {
            #expect(store.insert(keyID: "flood", nonce: "f\(index)", expiry: 130 + Int64(index), now: 100, quota: 5) == .inserted)
        }
        #expect(store.insert(keyID: "flood", nonce: "f5", expiry: 140, now: 101, quota: 5) == .quotaExceeded(retryAfter: 29))
        #expect(store.count(keyID: "flood") == 5)
        // Others still get in, up to their own quota.
        for index in 0..<5 {
            #expect(store.insert(keyID: "honest", nonce: "h\(index)", expiry: 140, now: 101, quota: 5) == .inserted)
        }
        // A replay is still a replay, not a quota refusal.
        #expect(store.insert(keyID: "flood", nonce: "f0", expiry: 140, now: 101, quota: 5) == .replayed)
        // The flood key's earliest nonce expires at 130: one slot frees for it.
        #expect(store.insert(keyID: "flood", nonce: "f5", expiry: 160, now: 130, quota: 5) == .inserted)
        #expect(store.insert(keyID: "flood", nonce: "f6", expiry: 160, now: 130, quota: 5) == .quotaExceeded(retryAfter: 1))
    }

    @Test("one key may use more than one shard's share of the store, up to the whole bound")
    func capacityIsShared() {
        let store = InMemoryNonceStore(capacity: 64, shardCount: 16)
        for index in 0..<64 {
            #expect(store.insert(keyID: "busy", nonce: "n\(index)", expiry: 200, now: 100, quota: 1000) == .inserted)
        }
        #expect(store.insert(keyID: "busy", nonce: "more", expiry: 200, now: 100, quota: 1000) == .full(retryAfter: 100))
        #expect(store.insert(keyID: "other", nonce: "x", expiry: 200, now: 100, quota: 1000) == .full(retryAfter: 100))
        #expect(store.count == 64)
    }

    @Test("when full, expired nonces of keys that went quiet are swept before anyone is refused")
    func sweepsQuietKeys() {
        let store = InMemoryNonceStore(capacity: 40, shardCount: 16)
        // Twenty quiet keys, two nonces each, all expired by 150; their shards are never written again.
        for key in 0..<20 {
            for index in 0..<2 {
                #expect(store.insert(keyID: "quiet-\(key)", nonce: "n\(index)", expiry: 150, now: 100, quota: 10) == .inserted)
            }
        }
        #expect(store.count == 40)
        // A new key finds room once the expired entries are swept, wherever they are.
        for index in 0..<10 {
            #expect(store.insert(keyID: "new", nonce: "n\(index)", expiry: 300, now: 200, quota: 10) == .inserted)
        }
        #expect(store.count == 10)
    }

    @Test("expired entries are cleared, so memory follows the live set")
    func memoryIsBounded() {
        let store = InMemoryNonceStore(capacity: 1000, shardCount: 8)
        for second in Int64(0)..<100 {
            for index in 0..<50 {
                #expect(store.insert(keyID: "k", nonce: "\(second)-\(index)", expiry: second + 5, now: second, quota: 1000) == .inserted)
            }
        }
        #expect(store.count <= 6 * 50)
    }

    @Test("concurrent inserts of one nonce admit exactly one")
    func concurrentInserts() async {
        let store = InMemoryNonceStore(capacity: 10_000)
        let results = await withTaskGroup(of: NonceInsertion.self) { group in
            for _ in 0..<64 { group.addTask { store.insert(keyID: "k", nonce: "same", expiry: 200, now: 100, quota: 100) } }
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
                    (0..<50).filter { store.insert(keyID: "k\(task)", nonce: "n\($0)", expiry: 200, now: 100, quota: 1000) == .inserted }
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
              slow: { rate: 5/s, burst: 5 }
              standard: { rate: 100/s, burst: 50 }
            keys:
              flood: { secret: "\(SignatureAuthTests.appSecret)", demo: true, services: ["*"]\(floodTier.map { ", tier: \($0)" } ?? "") }
              honest: { secret: "\(SignatureAuthTests.appSecret)", demo: true, services: ["*"], tier: standard }
            """
        }
    }

    /// One key floods with genuinely signed requests (fresh nonces) on one connection while
    /// another key calls on its own; the other key must keep getting 200s.
    func flood(gateway: TestGateway, refusal: (status: Int, type: String)) throws {
        let flooder = TestSigner(keyID: "flood", secret: SignatureAuthTests.appSecret)
        let honest = TestSigner(keyID: "honest", secret: SignatureAuthTests.appSecret)
        let floodClient = try gateway.connect()
        let honestClient = try gateway.connect()
        var refused = 0
        for round in 0..<400 {
            let response = try floodClient.request("GET", "/signed/f", headers: try flooder.headers("GET", "/signed/f"))
            if response.status != 200 {
                #expect(response.status == refusal.status)
                #expect(response.json?["type"] as? String == "urn:portico:problem:" + refusal.type)
                #expect(response.header("Retry-After") != nil)
                refused += 1
            }
            if round % 20 == 19 {
                let answer = try honestClient.request("GET", "/signed/h", headers: try honest.headers("GET", "/signed/h"))
                #expect(answer.status == 200, "round \(round): \(answer.status) \(answer.bodyText)")
            }
        }
        // The flood was refused (for itself), and not only at the start.
        #expect(refused >= 300)
    }

    @Test("a key flooding signed requests is stopped by its own rate limit before its nonces are recorded")
    func floodStoppedByRateLimit() async throws {
        try await withGateway(policy: Self.floodPolicy(floodTier: "slow")) { gateway, _ in
            try flood(gateway: gateway, refusal: (429, "rate-limited"))
        }
    }

    @Test("a key with no rate limit flooding signed requests is held to its share of the nonce store")
    func floodHeldToQuota() async throws {
        try await withGateway(policy: Self.floodPolicy(floodTier: nil)) { gateway, _ in
            try flood(gateway: gateway, refusal: (429, "replay-quota-exceeded"))
        }
    }
}
