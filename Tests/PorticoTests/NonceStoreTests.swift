import Foundation
import Testing

@testable import Portico

@Suite("The nonce store")
struct NonceStoreTests {
    @Test("a nonce is refused again until it expires, then accepted")
    func replayWindow() {
        let store = InMemoryNonceStore(capacity: 100, shardCount: 4)
        #expect(store.insert(keyID: "k", nonce: "n", expiry: 110, now: 100) == .inserted)
        #expect(store.insert(keyID: "k", nonce: "n", expiry: 111, now: 105) == .replayed)
        #expect(store.insert(keyID: "other", nonce: "n", expiry: 111, now: 105) == .inserted)  // per key
        #expect(store.insert(keyID: "k", nonce: "n", expiry: 120, now: 110) == .inserted)  // expired at 110
    }

    @Test("at its bound it refuses new nonces instead of forgetting live ones")
    func failsClosed() {
        let store = InMemoryNonceStore(capacity: 3, shardCount: 1)
        for index in 0..<3 {
            #expect(store.insert(keyID: "k", nonce: "n\(index)", expiry: 200 + Int64(index), now: 100) == .inserted)
        }
        #expect(store.insert(keyID: "k", nonce: "new", expiry: 300, now: 150) == .full(retryAfter: 50))
        // Every live nonce is still remembered.
        for index in 0..<3 {
            #expect(store.insert(keyID: "k", nonce: "n\(index)", expiry: 300, now: 150) == .replayed)
        }
        // Once the earliest expires, exactly one slot frees up.
        #expect(store.insert(keyID: "k", nonce: "new", expiry: 300, now: 200) == .inserted)
        #expect(store.insert(keyID: "k", nonce: "newer", expiry: 300, now: 200) == .full(retryAfter: 1))
        #expect(store.count == 3)
    }

    @Test("expired entries are cleared, so memory follows the live set")
    func memoryIsBounded() {
        let store = InMemoryNonceStore(capacity: 1000, shardCount: 8)
        for second in Int64(0)..<100 {
            for index in 0..<50 {
                #expect(store.insert(keyID: "k", nonce: "\(second)-\(index)", expiry: second + 5, now: second) == .inserted)
            }
        }
        #expect(store.count <= 6 * 50 + 8)
    }

    @Test("concurrent inserts of one nonce admit exactly one")
    func concurrentInserts() async {
        let store = InMemoryNonceStore(capacity: 10_000)
        let results = await withTaskGroup(of: NonceInsertion.self) { group in
            for _ in 0..<64 { group.addTask { store.insert(keyID: "k", nonce: "same", expiry: 200, now: 100) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { $0 == .inserted }.count == 1)
        #expect(results.filter { $0 == .replayed }.count == 63)
    }

    @Test("through the gateway, a full nonce cache answers 503 with Retry-After and never admits a replay")
    func fullCacheThroughGateway() async throws {
        let secret = SignatureAuthTests.appSecret
        let policy: ([Int]) -> String = { ports in
            """
            signatures: { nonceCacheSize: 16 }
            backends:
              echo: { url: "http://127.0.0.1:\(ports[0])" }
            services:
              signed: { path: /signed, auth: signature, versions: { 1: { proxy: { backend: echo } } } }
            keys:
              app-one: { secret: "\(secret)", demo: true, services: ["*"] }
            """
        }
        try await withGateway(policy: policy) { gateway, _ in
            let signer = TestSigner(keyID: "app-one", secret: secret)
            var accepted: [[(String, String)]] = []
            var refused = 0
            let client = try gateway.connect()
            for index in 0..<64 {
                let headers = try signer.headers("GET", "/signed/a", nonce: "nonce-\(index)")
                let response = try client.request("GET", "/signed/a", headers: headers)
                if response.status == 200 {
                    accepted.append(headers)
                } else {
                    #expect(response.status == 503)
                    #expect(response.json?["type"] as? String == "urn:portico:problem:replay-cache-full")
                    let retryAfter = try #require(Int(response.header("Retry-After") ?? ""))
                    #expect(retryAfter > 0 && retryAfter <= 301)
                    refused += 1
                }
            }
            #expect(accepted.count <= 16)
            #expect(refused >= 48)
            for headers in accepted {
                #expect(try client.request("GET", "/signed/a", headers: headers).status == 401)
            }
        }
    }
}
