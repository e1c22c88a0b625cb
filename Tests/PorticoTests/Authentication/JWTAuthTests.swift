import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

/// Tokens made by PyJWT (keys by Python's cryptography), checked by the real gateway against keys
/// it fetched from a JWKS server in the test.
@Suite("JWT bearer tokens: PyJWT's tokens, keys from a JWKS URL or a file, refusals, rotation and a dead issuer")
struct JWTAuthTests {
    static let issuer = "https://id.example.com/"
    static let python = InteropTests.python

    /// A JWKS server: its set can change, its fetches are counted, it can stop answering.
    final class IssuerServer: Sendable {
        struct State {
            var set = #"{"keys":[]}"#
            var cacheControl = "max-age=300"
            var up = true
        }

        let state = Mutex(State())
        let fetches = Atomic<Int>(0)

        var handler: BackendServer.Handler {
            { [self] _ in
                let current = state.withLock { $0 }
                guard current.up else { return .close }
                fetches.wrappingAdd(1, ordering: .relaxed)
                var headers = HTTPHeaders()
                headers.add(name: "content-type", value: "application/jwk-set+json")
                headers.add(name: "cache-control", value: current.cacheControl)
                return .full(status: .ok, headers: headers, body: ByteBuffer(string: current.set))
            }
        }

        func publish(_ keys: [Keys.Key]) {
            let jwks = keys.map(\.jwk)
            let data = try! JSONSerialization.data(withJSONObject: ["keys": jwks])
            state.withLock { $0.set = String(decoding: data, as: UTF8.self) }
        }
    }

    /// Keys PyJWT's side made, by kid.
    struct Keys {
        struct Key {
            let kid: String
            let alg: String
            let privatePEM: String
            let jwk: [String: Any]
        }

        let byKid: [String: Key]
        subscript(kid: String) -> Key { byKid[kid]! }

        static func make(_ specs: [(kid: String, alg: String)]) throws -> Keys {
            let request: [String: Any] = ["command": "keys", "keys": specs.map { ["kid": $0.kid, "alg": $0.alg] }]
            let object = try #require(try tool(request) as? [String: [String: Any]])
            var keys: [String: Key] = [:]
            for (kid, entry) in object {
                keys[kid] = Key(
                    kid: kid, alg: entry["alg"] as! String, privatePEM: entry["private"] as! String, jwk: entry["jwk"] as! [String: Any])
            }
            return Keys(byKid: keys)
        }
    }

    static func tool(_ request: [String: Any]) throws -> Any {
        let script = InteropTests.repositoryRoot.appendingPathComponent("scripts/interop/pyjwt-tool.py").path
        let result = try ChildProcess.run(python!, [script], input: try JSONSerialization.data(withJSONObject: request))
        try #require(result.termination == .exited(0), "\(String(decoding: result.errors, as: UTF8.self))")
        return try JSONSerialization.jsonObject(with: result.output)
    }

    /// A token PyJWT signs with `key` (its kid in the header unless `kid` says otherwise).
    static func token(
        _ key: Keys.Key, claims: [String: Any] = [:], kid: String?? = nil, alg: String? = nil, headers: [String: Any] = [:]
    ) throws -> String {
        var request: [String: Any] = [
            "command": "sign", "alg": alg ?? key.alg, "private": key.privatePEM, "claims": standardClaims.merging(claims) { $1 },
            "headers": headers,
        ]
        if let kid { request["kid"] = kid ?? NSNull() } else { request["kid"] = key.kid }
        return try #require((try tool(request) as? [String: String])?["token"])
    }

    static var standardClaims: [String: Any] {
        let now = Int(Date().timeIntervalSince1970)
        return ["iss": issuer, "aud": "portico", "sub": "user-42", "exp": now + 600, "iat": now, "scope": "orders.read profile"]
    }

    /// What the backend saw of the forwarded fields.
    static let backend: BackendServer.Handler = { request in
        var seen: [String: String] = [:]
        for name in ["x-user-id", "x-tenant", "authorization"] { seen[name] = request.headers.first(name: name) ?? "-" }
        let data = try! JSONSerialization.data(withJSONObject: seen)
        return .full(status: .ok, headers: ["content-type": "application/json"], body: ByteBuffer(bytes: data))
    }

    static func policy(_ ports: [Int], keysFile: String? = nil, extra: String = "") -> String {
        """
        jwt:
          issuers:
            corp:
              issuer: "\(issuer)"
              jwks: "http://127.0.0.1:\(ports[1])/jwks"
              audiences: [portico]
              algorithms: [ES256, RS256, PS256, EdDSA]
              refetchCooldown: 1h
              maxTokenBytes: 4KiB
            dead:
              issuer: "https://dead.example.com/"
              jwks: "http://127.0.0.1:\((try? RefusingPort.make()) ?? 1)/jwks"
              audiences: [portico]
              algorithms: [ES256]
        \(keysFile.map { """
            filed:
              issuer: "https://filed.example.com/"
              keysFile: "\($0)"
              audiences: ["*"]
              algorithms: [ES256]
        """ } ?? "")
        backends:
          app: { url: "http://127.0.0.1:\(ports[0])" }
        services:
          orders:
            path: /orders
            auth: jwt
            jwt: { issuers: [corp, dead\(keysFile == nil ? "" : ", filed")], scopes: [orders.read], claims: { tenant: [acme, globex] }, forwardClaims: { sub: X-User-Id, tenant: X-Tenant } }
            versions: { 1: { proxy: { backend: app } } }
          either:
            path: /either
            auth: [jwt, apiKey]
            jwt: { issuers: [corp] }
            versions: { 1: { proxy: { backend: app } } }
        keys:
          app-one: { secret: "either-secret-0123456789abcdefghijklmnopqrstuvwxyz", demo: true, services: [either] }
        \(extra)
        """
    }

    static func get(
        _ gateway: TestGateway, _ path: String, token: String?, headers: [(String, String)] = []
    ) throws -> RawHTTPClient.Response {
        try gateway.connect().request("GET", path, headers: (token.map { [("Authorization", "Bearer \($0)")] } ?? []) + headers)
    }

    @Test(
        "ES256, RS256, PS256 and EdDSA tokens by PyJWT verify; the claims named reach the backend, the client's own copies and the token do not",
        .enabled(if: python != nil, "PyJWT is not installed: run scripts/interop/setup.sh"))
    func acceptedTokens() async throws {
        let keys = try Keys.make([("e1", "ES256"), ("r1", "RS256"), ("p1", "PS256"), ("o1", "EdDSA")])
        let issuer = IssuerServer()
        issuer.publish(["e1", "r1", "p1", "o1"].map { keys[$0] })
        let recorder = RecordingLogHandler()
        try await withGateway(
            backends: [Self.backend, issuer.handler], logger: Logger(label: "test") { _ in recorder }, policy: { Self.policy($0) }
        ) { gateway, _ in
            for kid in ["e1", "r1", "p1", "o1"] {
                let token = try Self.token(keys[kid], claims: ["tenant": "acme"])
                let response = try Self.get(gateway, "/orders/1", token: token, headers: [("X-User-Id", "admin"), ("x-tenant", "root")])
                #expect(response.status == 200, "\(kid): \(response.bodyText)")
                let seen = response.json as? [String: String]
                #expect(seen?["x-user-id"] == "user-42", "\(kid)")
                #expect(seen?["x-tenant"] == "acme", "\(kid)")
                #expect(seen?["authorization"] == "-", "\(kid)")
            }
            // One fetch served all four keys.
            #expect(issuer.fetches.load(ordering: .relaxed) == 1)
        }
        let lines = recorder.records.filter { $0.message == "access" }
        #expect(lines.count == 4)
        #expect(lines.allSatisfy { $0.metadata["auth"]?.description == "jwt" && $0.metadata["subject"]?.description == "corp:user-42" })
        // The token itself is never logged.
        #expect(!lines.contains { $0.metadata.values.contains { $0.description.hasPrefix("ey") } })
    }

    @Test(
        "every malformed, misdirected or stale token gets 401 (403 for a scope or claim) with its own problem type",
        .enabled(if: python != nil, "PyJWT is not installed: run scripts/interop/setup.sh"))
    func refusedTokens() async throws {
        let keys = try Keys.make([("e1", "ES256"), ("r1", "RS256"), ("stranger", "ES256")])
        let issuer = IssuerServer()
        issuer.publish([keys["e1"], keys["r1"]])
        let now = Int(Date().timeIntervalSince1970)
        let good = try Self.token(keys["e1"], claims: ["tenant": "acme"])
        let parts = good.split(separator: ".").map(String.init)
        let tamperedPayload = Data(
            #"{"iss":"\#(Self.issuer)","aud":"portico","sub":"root","exp":\#(now + 600),"scope":"orders.read","tenant":"acme"}"#.utf8
        )
        .base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
        let publicModulus = try #require(keys["r1"].jwk["n"] as? String)
        let unsigned = try #require(
            (try Self.tool(["command": "sign", "alg": "none", "claims": Self.standardClaims, "kid": "e1"]) as? [String: String])?["token"])
        let confused = try #require(
            (try Self.tool(["command": "hmac", "secret": publicModulus, "claims": Self.standardClaims, "headers": ["kid": "r1"]])
                as? [String: String])?["token"])
        let cases: [(String, String?, Int, String)] = [
            ("no token", nil, 401, "token-required"),
            ("bad base64", "eyJhbGciOiJFUzI1NiJ9.e30!.c2ln", 401, "malformed-token"),
            ("two parts", "eyJhbGciOiJFUzI1NiJ9.e30", 401, "malformed-token"),
            ("five parts (a JWE)", "a.b.c.d.e", 401, "malformed-token"),
            ("alg none", unsigned, 401, "token-algorithm-refused"),
            ("HS256 keyed with the RSA key's public modulus", confused, 401, "token-algorithm-refused"),
            (
                "kid of an RSA key on an ES256 token", try Self.token(keys["e1"], claims: ["tenant": "acme"], kid: "r1"), 401,
                "token-invalid"
            ),
            (
                "a key the issuer never published", try Self.token(keys["stranger"], claims: ["tenant": "acme"], kid: "e1"), 401,
                "token-invalid"
            ),
            ("tampered payload", parts[0] + "." + tamperedPayload + "." + parts[2], 401, "token-invalid"),
            (
                "huge", try Self.token(keys["e1"], claims: ["tenant": "acme", "pad": String(repeating: "x", count: 5000)]), 401,
                "malformed-token"
            ),
            ("nested (cty: JWT)", try Self.token(keys["e1"], claims: ["tenant": "acme"], headers: ["cty": "JWT"]), 401, "malformed-token"),
            ("crit", try Self.token(keys["e1"], claims: ["tenant": "acme"], headers: ["crit": ["exp"]]), 401, "malformed-token"),
            ("expired", try Self.token(keys["e1"], claims: ["tenant": "acme", "exp": now - 600]), 401, "token-expired"),
            ("not yet valid", try Self.token(keys["e1"], claims: ["tenant": "acme", "nbf": now + 600]), 401, "token-not-yet-valid"),
            ("wrong audience", try Self.token(keys["e1"], claims: ["tenant": "acme", "aud": "billing"]), 401, "token-audience-refused"),
            (
                "another issuer", try Self.token(keys["e1"], claims: ["tenant": "acme", "iss": "https://evil.example/"]), 401,
                "token-invalid"
            ),
            ("no exp", try Self.token(keys["e1"], claims: ["tenant": "acme", "exp": NSNull()]), 401, "token-claims-missing"),
            ("exp not a number", try Self.token(keys["e1"], claims: ["tenant": "acme", "exp": "tomorrow"]), 401, "malformed-token"),
            ("scope missing", try Self.token(keys["e1"], claims: ["tenant": "acme", "scope": "profile"]), 403, "token-scope-insufficient"),
            ("claim not accepted", try Self.token(keys["e1"], claims: ["tenant": "initech"]), 403, "token-claim-refused"),
        ]
        try await withGateway(backends: [Self.backend, issuer.handler], policy: { Self.policy($0) }) { gateway, servers in
            #expect(try Self.get(gateway, "/orders/1", token: good).status == 200)
            for (name, token, status, type) in cases {
                let response = try Self.get(gateway, "/orders/1", token: token)
                #expect(response.status == status, "\(name): \(response.bodyText)")
                #expect(response.json?["type"] as? String == "urn:portico:problem:\(type)", "\(name): \(response.bodyText)")
                if status == 401 || type == "token-scope-insufficient" {
                    let challenge = response.header("WWW-Authenticate") ?? ""
                    #expect(challenge.hasPrefix("Bearer realm=\"portico\""), "\(name): \(challenge)")
                }
            }
            // Only the good token reached the backend.
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test(
        "a key rotated in is taken at its first token, and one rotated out stops verifying then, cached or not; a flood of made-up kids costs the issuer nothing more within the cooldown",
        .enabled(if: python != nil, "PyJWT is not installed: run scripts/interop/setup.sh"))
    func rotationAndFlood() async throws {
        let keys = try Keys.make([("old", "ES256"), ("new", "ES256")])
        let issuer = IssuerServer()
        issuer.publish([keys["old"]])
        try await withGateway(backends: [Self.backend, issuer.handler], policy: { Self.policy($0) }) { gateway, _ in
            let old = try Self.token(keys["old"], claims: ["tenant": "acme"])
            // The second time from the verified tokens, without a signature check.
            for _ in 0..<2 { #expect(try Self.get(gateway, "/orders/1", token: old).status == 200) }
            #expect(issuer.fetches.load(ordering: .relaxed) == 1)
            issuer.publish([keys["new"]])
            let rotated = try Self.get(gateway, "/orders/1", token: try Self.token(keys["new"], claims: ["tenant": "acme"]))
            #expect(rotated.status == 200, "\(rotated.bodyText)")
            #expect(issuer.fetches.load(ordering: .relaxed) == 2)
            // The old key left the set with that fetch: its token, verified before, is not any more.
            let retired = try Self.get(gateway, "/orders/1", token: old)
            #expect(retired.status == 401, "\(retired.bodyText)")
            #expect(retired.json?["type"] as? String == "urn:portico:problem:token-invalid")
            for index in 0..<25 {
                let forged = try Self.token(keys["new"], claims: ["tenant": "acme"], kid: "made-up-\(index)")
                let response = try Self.get(gateway, "/orders/1", token: forged)
                #expect(response.status == 401)
                #expect(response.json?["type"] as? String == "urn:portico:problem:token-invalid")
            }
            #expect(issuer.fetches.load(ordering: .relaxed) == 2)
        }
    }

    @Test(
        "an issuer never reached gets 503 with Retry-After; one that goes down keeps serving its last good keys",
        .enabled(if: python != nil, "PyJWT is not installed: run scripts/interop/setup.sh"))
    func deadIssuer() async throws {
        let keys = try Keys.make([("e1", "ES256")])
        let issuer = IssuerServer()
        issuer.publish([keys["e1"]])
        // Every answer is stale at once, so every token starts a background refresh.
        issuer.state.withLock { $0.cacheControl = "max-age=0" }
        let extra = ""
        try await withGateway(
            backends: [Self.backend, issuer.handler],
            policy: {
                Self.policy($0, extra: extra).replacingOccurrences(
                    of: "refetchCooldown: 1h", with: "refetchCooldown: 1h\n      minimumRefresh: 1ms")
            }
        ) { gateway, _ in
            let unreachable = try Self.get(
                gateway, "/orders/1", token: try Self.token(keys["e1"], claims: ["tenant": "acme", "iss": "https://dead.example.com/"]))
            #expect(unreachable.status == 503, "\(unreachable.bodyText)")
            #expect(unreachable.json?["type"] as? String == "urn:portico:problem:issuer-keys-unavailable")
            #expect(unreachable.header("Retry-After") != nil)

            let token = try Self.token(keys["e1"], claims: ["tenant": "acme"])
            #expect(try Self.get(gateway, "/orders/1", token: token).status == 200)
            issuer.state.withLock { $0.up = false }
            for _ in 0..<5 {
                let response = try Self.get(gateway, "/orders/1", token: token)
                #expect(response.status == 200, "\(response.bodyText)")
            }
        }
    }

    @Test(
        "keys from a JWK Set file; a service taking a token or an API key admits either, and names both when given neither",
        .enabled(if: python != nil, "PyJWT is not installed: run scripts/interop/setup.sh"))
    func keysFileAndSeveralSchemes() async throws {
        let keys = try Keys.make([("f1", "ES256"), ("e1", "ES256")])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-jwks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("filed.json").path
        try JSONSerialization.data(withJSONObject: ["keys": [keys["f1"].jwk]]).write(to: URL(fileURLWithPath: file))
        let issuer = IssuerServer()
        issuer.publish([keys["e1"]])
        try await withGateway(backends: [Self.backend, issuer.handler], policy: { Self.policy($0, keysFile: file) }) { gateway, _ in
            let filed = try Self.token(keys["f1"], claims: ["tenant": "globex", "iss": "https://filed.example.com/", "aud": "anyone"])
            let response = try Self.get(gateway, "/orders/1", token: filed)
            #expect(response.status == 200, "\(response.bodyText)")

            let corp = try Self.token(keys["e1"])
            #expect(try Self.get(gateway, "/either/1", token: corp).status == 200)
            let byKey = try Self.get(
                gateway, "/either/1", token: nil, headers: [("X-API-Key", "app-one.either-secret-0123456789abcdefghijklmnopqrstuvwxyz")])
            #expect(byKey.status == 200)
            let neither = try Self.get(gateway, "/either/1", token: nil)
            #expect(neither.status == 401)
            #expect(neither.json?["type"] as? String == "urn:portico:problem:credentials-required")
            #expect(neither.json?["accepted"] as? String == "jwt, apiKey")
            let challenges = neither.headers.filter { $0.0.lowercased() == "www-authenticate" }.map(\.1)
            #expect(challenges == ["Bearer realm=\"portico\"", "APIKey header=\"X-API-Key\""])
            // A bad token beside a good key: the key admits.
            let mixed = try Self.get(
                gateway, "/either/1", token: "not.a.token",
                headers: [("X-API-Key", "app-one.either-secret-0123456789abcdefghijklmnopqrstuvwxyz")])
            #expect(mixed.status == 200)
        }
    }
}
