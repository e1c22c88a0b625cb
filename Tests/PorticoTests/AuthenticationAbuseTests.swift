import Foundation
import PorticoDemoBackends
import PorticoSigning
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

/// What an attacker without a key can make the signature check do, and what a captured request
/// refused once can do later: bounded work per request, a budget of failures per address, and no
/// second chance for a refused request.
@Suite("Authentication under abuse")
struct AuthenticationAbuseTests {
    static let secret = SignatureAuthTests.appSecret

    static func policy(signatures: String = "", limits: String = "authFailures: off") -> ([Int]) -> String {
        { ports in
            """
            signatures: { maxClockSkew: 300s, requireNonce: true\(signatures) }
            limits: { \(limits) }
            backends:
              echo: { url: "http://127.0.0.1:\(ports[0])" }
            services:
              signed: { path: /signed, auth: signature, versions: { 1: { proxy: { backend: echo } } } }
              keyed: { path: /keyed, auth: apiKey, versions: { 1: { proxy: { backend: echo } } } }
              open: { path: /open, versions: { 1: { proxy: { backend: echo } } } }
            tiers:
              roomy: { rate: 10000/s, burst: 10000 }
              single: { rate: 1/h, burst: 1, nonceQuota: 10 }
            keys:
              app-one: { secret: "\(secret)", demo: true, services: ["*"], tier: roomy }
              metered: { secret: "\(secret)", demo: true, services: ["*"], tier: single }
            """
        }
    }

    static let signer = TestSigner(keyID: "app-one", secret: secret)

    /// The issue's attack: a query of 700 parameters and a signature covering hundreds of them.
    static let bigQuery = (0..<700).map { "p\($0)=\($0)" }.joined(separator: "&")

    static func queryComponents(_ count: Int) -> [ComponentIdentifier] {
        [.method, .authority, .path, .query] + (0..<count).map { ComponentIdentifier.queryParameter("p\($0)") }
    }

    @Test("a signature covering more than maxComponents is refused with 401 naming the limit, for a known key or not")
    func tooManyComponents() async throws {
        try await withGateway(policy: Self.policy()) { gateway, servers in
            let client = try gateway.connect()
            let target = "/signed/q?" + Self.bigQuery
            for keyID in ["app-one", "nobody"] {
                let headers = try Self.signer.headers("GET", target, components: Self.queryComponents(300), keyID: keyID)
                let response = try client.request("GET", target, headers: headers)
                #expect(response.status == 401, "\(keyID)")
                #expect(response.json?["type"] as? String == "urn:portico:problem:signature-too-large")
                #expect(response.json?["limit"] as? String == "maxComponents")
                #expect(response.json?["maxComponents"] as? String == "32")
            }
            // 32 in all, the default limit, is verified as any signature is.
            let headers = try Self.signer.headers("GET", target, components: Self.queryComponents(28))
            #expect(try client.request("GET", target, headers: headers).status == 200)
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test("a signature base longer than maxBaseBytes is refused with 401 naming the limit")
    func baseTooLarge() async throws {
        try await withGateway(policy: Self.policy(signatures: ", maxBaseBytes: 1KiB")) { gateway, servers in
            let client = try gateway.connect()
            let big = String(repeating: "b", count: 2000)
            let components: [ComponentIdentifier] = [.method, .authority, .path, .field("x-big")]
            let headers = try Self.signer.headers("GET", "/signed/a", headers: [("X-Big", big)], components: components)
            let response = try client.request("GET", "/signed/a", headers: headers)
            #expect(response.status == 401)
            #expect(response.json?["type"] as? String == "urn:portico:problem:signature-too-large")
            #expect(response.json?["maxBaseBytes"] as? String == "1024")
            let small = try Self.signer.headers("GET", "/signed/a", headers: [("X-Big", "b")], components: components)
            #expect(try client.request("GET", "/signed/a", headers: small).status == 200)
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test("an address past its failed authentications gets 429 without verification, for genuine requests too; others are untouched")
    func failedAuthenticationsLimited() async throws {
        let clock = FacadeFixture.ManualLimiterClock()
        let policy = Self.policy(limits: "authFailures: { rate: 1/h, burst: 3 }")
        try await withGateway(rateLimiter: clock.limiter, policy: policy) { gateway, servers in
            let client = try gateway.connect()
            let forged = try Self.signer.headers("GET", "/signed/a", secret: "not-the-secret-0123456789abcdefghijklmnop")
            for _ in 0..<3 {
                #expect(try client.request("GET", "/signed/a", headers: forged).status == 401)
            }
            // API-key failures count against the same address.
            let refused = try client.request("GET", "/keyed/a", headers: [("X-API-Key", "app-one.wrong")])
            #expect(refused.status == 429)
            #expect(refused.json?["limit"] as? String == "auth_failures")
            #expect(refused.header("retry-after") != nil)
            // Even a genuine signature is refused now: nothing is verified for this address.
            let genuine = try client.request("GET", "/signed/a", headers: try Self.signer.headers("GET", "/signed/a"))
            #expect(genuine.status == 429)
            #expect(genuine.json?["type"] as? String == "urn:portico:problem:rate-limited")
            // A service without authentication still answers it, and another address is not affected.
            #expect(try client.request("GET", "/open/a").status == 200)
            let other = try gateway.connect(socketOptions: .init(sourceAddress: "127.0.0.2"))
            #expect(try other.request("GET", "/signed/a", headers: try Self.signer.headers("GET", "/signed/a")).status == 200)
            // Once the bucket has room again, the address is verified again.
            clock.advance(by: .seconds(3600))
            #expect(try client.request("GET", "/signed/a", headers: try Self.signer.headers("GET", "/signed/a")).status == 200)
            #expect(servers[0].requestsReceived == 3)
            #expect(gateway.gateway.metrics.render().contains(#"portico_rate_limit_refusals_total{kind="auth_failures"} 2"#))
        }
    }

    @Test("a signed POST refused with 429 is never admitted later: its replay is refused once the limit has room again")
    func refusedRequestNotReplayable() async throws {
        let clock = FacadeFixture.ManualLimiterClock()
        let metered = TestSigner(keyID: "metered", secret: Self.secret)
        try await withGateway(rateLimiter: clock.limiter, policy: Self.policy()) { gateway, servers in
            let client = try gateway.connect()
            let first = try metered.headers("POST", "/signed/order", body: "buy 1")
            #expect(try client.request("POST", "/signed/order", headers: first, body: "buy 1").status == 200)
            let captured = try metered.headers("POST", "/signed/order", body: "buy 2")
            let refused = try client.request("POST", "/signed/order", headers: captured, body: "buy 2")
            #expect(refused.status == 429)
            // Later, with room in the key's bucket, the captured request is sent again.
            clock.advance(by: .seconds(3600))
            let replay = try client.request("POST", "/signed/order", headers: captured, body: "buy 2")
            #expect(replay.status == 401)
            #expect(replay.json?["type"] as? String == "urn:portico:problem:signature-replayed")
            #expect(servers[0].requestsReceived == 1)
            // The key itself is fine: a fresh signature passes.
            let fresh = try metered.headers("POST", "/signed/order", body: "buy 3")
            #expect(try client.request("POST", "/signed/order", headers: fresh, body: "buy 3").status == 200)
        }
    }

    @Test("a signed request refused by a later stage (an unknown version) keeps its nonce too")
    func refusedByVersionStage() async throws {
        try await withGateway(policy: { ports in
            Self.policy()(ports).replacingOccurrences(of: "path: /signed,", with: "path: \"/api/{version}/signed\",")
        }) { gateway, servers in
            let client = try gateway.connect()
            let headers = try Self.signer.headers("GET", "/api/7/signed/a")
            #expect(try client.request("GET", "/api/7/signed/a", headers: headers).status == 404)
            let replay = try client.request("GET", "/api/7/signed/a", headers: headers)
            #expect(replay.status == 401)
            #expect(replay.json?["type"] as? String == "urn:portico:problem:signature-replayed")
            #expect(servers[0].requestsReceived == 0)
        }
    }
}
