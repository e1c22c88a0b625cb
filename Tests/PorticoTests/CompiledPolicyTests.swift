import Dispatch
import PorticoPolicy
import PorticoSigning
import Testing

@testable import Portico

/// What a compiled policy holds ready for requests, and that it says the same as the policy did
/// when each request worked it out for itself.
@Suite("Compiled policy")
struct CompiledPolicyTests {
    static let policy = """
        backends:
          plain: { url: "http://127.0.0.1:8080", connectTimeout: 1s, timeout: 7s }
          standardPort: { url: "http://quotes.internal:80/base", rateLimit: { rate: 20/s, burst: 5 }, maxConcurrent: 3 }
          secure: { url: "https://secure.internal", client: curl }
          secureOddPort: { url: "https://secure.internal:8443/x/y" }
          ipv6: { url: "http://[::1]:9000" }
        services:
          open:
            path: /open
            addressRateLimit: { rate: 10/m, burst: 2 }
            versions: { 1: { proxy: { backend: plain } } }
          quotes:
            path: /api/{version}/quotes
            auth: apiKey
            versions:
              1: { proxy: { backend: standardPort, rewrite: /v1 } }
              2: { proxy: { backend: secure } }
          other: { path: /other, auth: apiKey, versions: { 1: { proxy: { backend: ipv6, rewrite: / } } } }
          odd: { path: /odd, versions: { 1: { proxy: { backend: secureOddPort } } } }
        tiers:
          standard: { rate: 100/m, burst: 10, services: { other: { rate: 5/s, burst: 1 } } }
          gold: { rate: 1000/h, burst: 50 }
        apiKeys: { header: X-Custom-Key }
        signatures: { requiredComponents: ["@method", "@path"] }
        """

    static func compiled() throws -> CompiledPolicy {
        CompiledPolicy(try TestGateway.snapshot(policy: policy))
    }

    @Test("the API-key header is kept lowercased for the forwarding filter")
    func apiKeyHeader() throws {
        #expect(try Self.compiled().apiKeyHeader == "x-custom-key")
    }

    @Test("the required signature components come in the policy's order, then the request's own")
    func signatureRequirements() throws {
        let requirements = try Self.compiled().signatureRequirements
        #expect(requirements.always == [.method, .path])
        let all: Set<ComponentIdentifier> = [.method, .path, .query, .field("content-digest"), .field("x-client-version")]
        #expect(requirements.firstMissing(from: all, hasQuery: true, hasBody: true, hasClientVersion: true) == nil)
        #expect(requirements.firstMissing(from: [.path], hasQuery: true, hasBody: true, hasClientVersion: true) == .method)
        #expect(requirements.firstMissing(from: [.method, .path], hasQuery: false, hasBody: false, hasClientVersion: false) == nil)
        #expect(requirements.firstMissing(from: [.method, .path], hasQuery: true, hasBody: true, hasClientVersion: true) == .query)
        #expect(
            requirements.firstMissing(from: [.method, .path, .query], hasQuery: true, hasBody: true, hasClientVersion: true)
                == .field("content-digest"))
        #expect(
            requirements.firstMissing(from: [.method, .path], hasQuery: false, hasBody: false, hasClientVersion: true)
                == .field("x-client-version"))
    }

    @Test("the store hands out one compiled policy until a reload swaps in the next, under concurrent readers")
    func storeSwaps() throws {
        let first = try TestGateway.snapshot(policy: Self.policy)
        let second = try TestGateway.snapshot(policy: "services: {}\n")
        let store = PolicyStore(first)
        let initial = store.current
        #expect(store.current === initial)
        #expect(initial.snapshot.policy.services.count == 4)
        store.replace(with: second)
        #expect(store.current !== initial)
        #expect(store.current.snapshot.policy.services.isEmpty)
        // Readers on every thread while the policy is replaced over and over: each read is a whole
        // compiled policy, one of the two.
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0..<2000 {
                if worker == 0 && round % 20 == 0 {
                    store.replace(with: round % 40 == 0 ? first : second)
                } else {
                    let current = store.current
                    precondition(current.snapshot.routes.services.count == current.snapshot.policy.services.count)
                    precondition(current.snapshot.routes.services.count == 4 || current.snapshot.routes.services.isEmpty)
                }
            }
        }
        #expect(initial.snapshot.routes.services.count == 4)
    }
}
