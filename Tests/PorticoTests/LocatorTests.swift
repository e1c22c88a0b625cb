import Foundation
import NIOHTTP1
import PorticoClient
import PorticoCrypto
import PorticoDemoBackends
import PorticoPolicy
import PorticoSigning
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

/// The service locator as the gateway serves it: generated from the live policy, cacheable
/// (`ETag`, `Cache-Control`, 304), and signed once per snapshot.
@Suite("Service locator")
struct LocatorTests {
    static func services(_ ports: [Int], secondVersion: Bool = true) -> String {
        """
        backends:
          echo: { url: "http://127.0.0.1:\(ports.first ?? 1)" }
        services:
          quotes:
            path: /api/{version}/quotes
            auth: signature
            versions:
              1: { proxy: { backend: echo }, deprecation: 2027-06-30 }
        \(secondVersion ? "      2: { proxy: { backend: echo }, output: application/vnd.quotes+json }" : "")
            compatibility:
              - { clients: "<2.0.0", version: 1 }
        \(secondVersion ? "      - { clients: \">=2.5.0\", platforms: [ipad], version: 2 }" : "")
            minimumClientVersion: 1.0.0
          echo:
            path: /echo
            versions:
              1: { proxy: { backend: echo } }
              3: { proxy: { backend: echo } }
            default: 1
          partner:
            path: /p
            host: partner.example.com
            auth: apiKey
            versions:
              1: { proxy: { backend: echo } }
        """
    }

    static func policy(key: String? = LocatorKeys.signing.file, secondVersion: Bool = true) -> ([Int]) -> String {
        { ports in
            """
            \(services(ports, secondVersion: secondVersion))
            locator:
              maxAge: 120s
              signatureGrace: 30s
              environments:
                production: { publicBaseURL: "https://API.example.com:8443/gw/", listeners: [test] }
            \(key.map { "  signingKey: \"\($0)\"" } ?? "")
            """
        }
    }

    static let expectedDocument =
        #"{"environment":"production","services":["#
        + #"{"metadata":{"auth":"none","default":true,"input":"application/json","output":"application/json"},"name":"echo","url":"https://api.example.com:8443/gw/echo?apiVersion=1","version":"1"},"#
        + #"{"metadata":{"auth":"none","default":false,"input":"application/json","output":"application/json"},"name":"echo","url":"https://api.example.com:8443/gw/echo?apiVersion=3","version":"3"},"#
        + #"{"metadata":{"auth":"apiKey","default":true,"input":"application/json","output":"application/json"},"name":"partner","url":"https://partner.example.com:8443/gw/p","version":"1"},"#
        + #"{"buckets":[{"clients":"<2.0.0"}],"metadata":{"auth":"signature","default":false,"deprecation":"2027-06-30","input":"application/json","minimumClientVersion":"1.0.0","output":"application/json"},"name":"quotes","url":"https://api.example.com:8443/gw/api/1/quotes","version":"1"},"#
        + #"{"buckets":[{"clients":">=2.5.0","platforms":["ipad"]}],"metadata":{"auth":"signature","default":true,"input":"application/json","minimumClientVersion":"1.0.0","output":"application/vnd.quotes+json"},"name":"quotes","url":"https://api.example.com:8443/gw/api/2/quotes","version":"2"}"#
        + "]}"

    @Test("the document lists every service and version of the policy, under the listener's public base URL")
    func documentMatchesPolicy() async throws {
        try await withGateway(policy: Self.policy()) { gateway, servers in
            let response = try gateway.connect().request("GET", "/serviceLocator.json")
            #expect(response.status == 200)
            #expect(response.bodyText == Self.expectedDocument)
            #expect(response.header("Content-Type") == "application/json")
            #expect(response.header("Cache-Control") == "public, max-age=120")
            #expect(response.header("Content-Length") == String(response.body.count))
            // The client library reads it.
            let document = try ServiceLocatorDocument.decode(Data(response.body))
            #expect(
                document.endpoint(service: "quotes", version: "2")?.url.absoluteString == "https://api.example.com:8443/gw/api/2/quotes")
            #expect(document.endpoint(service: "quotes", version: "2")?.buckets == [.init(clients: ">=2.5.0", platforms: ["ipad"])])
            #expect(document.endpoint(service: "quotes", version: "1")?.metadata["deprecation"] == "2027-06-30")
            #expect(document.endpoint(service: "echo", version: "1")?.metadata["default"] == "true")
            // Served by the gateway itself, with no authentication or routing.
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("ETag and Content-Digest describe the exact bytes; a matching If-None-Match gets 304; HEAD and POST")
    func cachingFields() async throws {
        try await withGateway(policy: Self.policy()) { gateway, _ in
            let client = try gateway.connect()
            let first = try client.request("GET", "/serviceLocator.json?cachebuster=1")
            let etag = try #require(first.header("ETag"))
            #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count > 10)
            let digest = first.body.withUnsafeBytes { ContentDigest.value(for: $0, using: OpenSSLDigest()) }
            #expect(first.header("Content-Digest") == digest)
            #expect(first.header("Age").flatMap(Int.init).map { $0 >= 0 && $0 <= 120 } == true)

            for match in [etag, "W/\(etag)", "\"other\", \(etag)", "*"] {
                let revalidated = try client.request("GET", "/serviceLocator.json", headers: [("If-None-Match", match)])
                #expect(revalidated.status == 304, "\(match)")
                #expect(revalidated.body.isEmpty)
                #expect(revalidated.header("ETag") == etag)
                #expect(revalidated.header("Cache-Control") == "public, max-age=120")
                #expect(revalidated.header("Signature") == first.header("Signature"))
            }
            let changed = try client.request("GET", "/serviceLocator.json", headers: [("If-None-Match", "\"stale\"")])
            #expect(changed.status == 200)
            #expect(changed.body == first.body)

            try client.send("HEAD /serviceLocator.json HTTP/1.1\r\nHost: gateway.test\r\n\r\n")
            let head = try client.readResponse(headRequest: true)
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == String(first.body.count))
            #expect(head.header("ETag") == etag)

            let post = try client.request("POST", "/serviceLocator.json", body: "{}")
            #expect(post.status == 405)
            #expect(post.header("Allow") == "GET, HEAD")
            #expect(post.json?["type"] as? String == "urn:portico:problem:method-not-allowed")
            // The connection is still good after all that.
            #expect(try client.request("GET", "/serviceLocator.json").status == 200)
        }
    }

    @Test("a policy change gives a new document, ETag and signature; the old ETag no longer matches")
    func changesWithPolicy() async throws {
        try await withGateway(policy: Self.policy(secondVersion: false)) { gateway, servers in
            let client = try gateway.connect()
            let before = try client.request("GET", "/serviceLocator.json")
            let etag = try #require(before.header("ETag"))
            #expect(!before.bodyText.contains("/api/2/quotes"))
            // Unchanged policy, new snapshot: same bytes, same tag.
            try gateway.reload(policy: Self.policy(secondVersion: false)(servers.map(\.port)))
            #expect(try client.request("GET", "/serviceLocator.json", headers: [("If-None-Match", etag)]).status == 304)

            try gateway.reload(policy: Self.policy()(servers.map(\.port)))
            let after = try client.request("GET", "/serviceLocator.json", headers: [("If-None-Match", etag)])
            #expect(after.status == 200)
            #expect(after.bodyText == Self.expectedDocument)
            #expect(after.header("ETag") != etag)
            #expect(after.header("Content-Digest") != before.header("Content-Digest"))
            #expect(after.header("Signature") != before.header("Signature"))
            #expect(try client.request("GET", "/serviceLocator.json", headers: [("If-None-Match", after.header("ETag")!)]).status == 304)
        }
    }

    @Test("the signature covers @status, content-type and content-digest, with created, expires and keyid; the public key is served")
    func signatureFields() async throws {
        try await withGateway(policy: Self.policy()) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/serviceLocator.json")
            let signature = try SignatureFields.select(
                label: "locator", signatureInput: try #require(response.header("Signature-Input")),
                signature: try #require(response.header("Signature")))
            #expect(signature.input.components.map(\.description) == [#""@status""#, #""content-type""#, #""content-digest""#])
            let created = try #require(signature.input.created)
            #expect(signature.input.expires == created + 120 + 30)
            let keyID = try #require(signature.input.keyID)
            #expect(keyID.hasPrefix("ed25519-") && keyID.count == 24)
            #expect(signature.value.count == 64)

            let keys = try client.request("GET", "/.well-known/portico-locator-keys.json")
            #expect(keys.status == 200)
            #expect(keys.header("Content-Type") == "application/jwk-set+json")
            let jwk = try #require((keys.json?["keys"] as? [[String: String]])?.first)
            #expect(jwk["kty"] == "OKP" && jwk["crv"] == "Ed25519" && jwk["alg"] == "EdDSA")
            #expect(jwk["kid"] == keyID)
            #expect(jwk["x"] == LocatorSigning.base64URL(LocatorKeys.signing.key.publicKey))
        }
    }

    @Test("without a signing key the document is served unsigned, and no public key is published")
    func unsigned() async throws {
        try await withGateway(policy: Self.policy(key: nil)) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/serviceLocator.json")
            #expect(response.status == 200)
            #expect(response.header("Signature") == nil && response.header("Signature-Input") == nil)
            #expect(try client.request("GET", "/.well-known/portico-locator-keys.json").status == 404)
        }
    }

    @Test("each listener publishes its environment's base URL")
    func environmentsByListener() async throws {
        let text = """
            listeners:
              - { name: public, address: 127.0.0.1, port: 0 }
              - { name: staging, address: 127.0.0.1, port: 0 }
              - { name: other, address: 127.0.0.1, port: 0 }
            accessLog: { enabled: false }
            \(Self.services([1]))
            locator:
              path: /discovery/services.json
              publicBaseURL: "http://127.0.0.1:9"
              environments:
                production: { publicBaseURL: "https://api.example.com", listeners: [public] }
                staging: { publicBaseURL: "https://staging.example.com", listeners: [staging] }
              signingKey: "\(LocatorKeys.signing.file)"
            """
        let gateway = Gateway(snapshot: try PolicyLoader().load(sources: [(file: "p.yaml", text: text)]))
        try await gateway.start()
        do {
            for (listener, environment, base) in [
                ("public", "production", "https://api.example.com"), ("staging", "staging", "https://staging.example.com"),
                ("other", nil, "http://127.0.0.1:9"),
            ] {
                let client = try RawHTTPClient(port: gateway.boundPorts[listener]!)
                let response = try client.request("GET", "/discovery/services.json")
                #expect(response.status == 200, "\(listener)")
                #expect(response.json?["environment"] as? String == environment, "\(listener)")
                let first = (response.json?["services"] as? [[String: Any]])?.first
                #expect(first?["url"] as? String == "\(base)/echo?apiVersion=1", "\(listener)")
                #expect(try client.request("GET", "/serviceLocator.json").status == 404)
            }
        } catch {
            await gateway.shutdown()
            throw error
        }
        await gateway.shutdown()
    }

    @Test("the locator settings are validated with file, line and key path")
    func brokenSettings() {
        let text = """
            listeners:
              - { name: public, address: 127.0.0.1, port: 0 }
              - { name: local, address: 127.0.0.1, port: 1 }
            locator:
              path: serviceLocator.json
              maxAge: forever
              environments:
                production: { publicBaseURL: "ftp://example.com", listeners: [public, nowhere] }
                staging: { publicBaseURL: "https://staging.example.com", listeners: [public] }
              signingKey: "/nonexistent/key.pem"
            """
        var diagnostics: [String] = []
        do {
            let snapshot = try PolicyLoader().load(sources: [(file: "p.yaml", text: text)])
            _ = try LocatorSigning.key(for: snapshot)
        } catch {
            diagnostics = error.diagnostics.map(\.description)
        }
        #expect(
            diagnostics == [
                "p.yaml:5: locator.path: expected a path such as /serviceLocator.json (starting with '/', no query, empty or dot segments), found \"serviceLocator.json\"",
                "p.yaml:5: locator: listener(s) local have no public base URL: set publicBaseURL, or name them in an environment",
                "p.yaml:6: locator.maxAge: expected a positive duration such as 500ms, 10s or 5m, found forever",
                "p.yaml:8: locator.environments.production.publicBaseURL: expected an absolute http:// or https:// URL without query, fragment or credentials, found \"ftp://example.com\"",
                "p.yaml:8: locator.environments.production.listeners.1: unknown listener \"nowhere\"; expected one of: public, local",
                "p.yaml:9: locator.environments.staging.listeners.0: listener \"public\" is already in environment \"production\"",
            ], "\(diagnostics)")
    }

    @Test("portico check warns when a service's path holds a locator path, which the gateway answers first")
    func shadowedRoute() throws {
        let snapshot = try PolicyLoader().load(sources: [
            (
                file: "p.yaml",
                text: """
                listeners:
                  - { name: public, address: 127.0.0.1, port: 0 }
                backends:
                  b: { url: "http://127.0.0.1:1" }
                services:
                  everything: { path: /, versions: { 1: { proxy: { backend: b } } } }
                  wellKnown: { path: "/{version}/.well-known", versions: { 1: { proxy: { backend: b } } } }
                locator:
                  publicBaseURL: "https://api.example.com"
                  signingKey: "\(LocatorKeys.signing.file)"
                """
            )
        ])
        #expect(
            snapshot.warnings.map(\.description) == [
                "p.yaml:9: locator: /serviceLocator.json is also under service everything's path /; the gateway answers it as the locator's",
                "p.yaml:9: locator: /.well-known/portico-locator-keys.json is also under service everything's path /; the gateway answers it as the locator's",
                "p.yaml:9: locator: /.well-known/portico-locator-keys.json is also under service wellKnown's path /{version}/.well-known; the gateway answers it as the locator's",
            ], "\(snapshot.warnings)")
    }

    @Test("a signing key that cannot be used is reported against locator.signingKey, and the gateway does not start")
    func unusableKey() async throws {
        let notAKey = LocatorKeys.directory.appendingPathComponent("not-a-key.pem").path
        try "hello".write(toFile: notAKey, atomically: true, encoding: .utf8)
        let cases = [
            ("/nonexistent/key.pem", "cannot read /nonexistent/key.pem"),
            (notAKey, "not a PEM private key (expected -----BEGIN PRIVATE KEY-----)"),
        ]
        for (file, message) in cases {
            let snapshot = try TestGateway.snapshot(
                policy: "locator: { publicBaseURL: \"https://api.example.com\", signingKey: \"\(file)\" }\n" + Self.services([1]))
            #expect {
                _ = try LocatorSigning.key(for: snapshot)
            } throws: { error in
                (error as? PolicyError)?.diagnostics.map(\.description) == ["test.yaml:4: locator.signingKey: \(file): \(message)"]
            }
            let gateway = Gateway(snapshot: snapshot)
            await #expect(throws: PolicyError.self) { try await gateway.start() }
            await gateway.shutdown()
        }
    }
}

/// The signature's life, driven by the time the locator is asked at rather than by waiting.
@Suite("Service locator signing schedule")
struct LocatorSigningScheduleTests {
    static func variant() -> CompiledLocator.Variant {
        CompiledLocator.Variant(
            body: Array(#"{"services":[]}"#.utf8), signer: .init(key: LocatorKeys.signing.key, keyID: "k"), maxAge: 120, grace: 30,
            tag: LocatorTag.value(environment: nil))
    }

    static func created(_ response: BuiltInResponse) throws -> Int64 {
        let input = try #require(response.headers.first(name: "signature-input"))
        let signature = try SignatureFields.select(
            label: "locator", signatureInput: input, signature: response.headers.first(name: "signature")!)
        return try #require(signature.input.created)
    }

    @Test("one signature serves every request while its document is fresh; a stale one is replaced, once")
    func resignsOnlyWhenStale() throws {
        let variant = Self.variant()
        let now = Int64(Date().timeIntervalSince1970)
        let first = variant.response(ifNoneMatch: [], head: false, now: now)
        let created = try Self.created(first)
        #expect(created <= now && created >= now - 60)
        // Within max-age: the same signature, and Age counts up.
        let later = variant.response(ifNoneMatch: [], head: false, now: created + 119)
        #expect(later.headers.first(name: "signature") == first.headers.first(name: "signature"))
        #expect(later.headers.first(name: "age") == "119")
        // At max-age: signed anew, valid for max-age + grace from then, and Age starts again.
        let stale = variant.response(ifNoneMatch: [], head: false, now: created + 120)
        #expect(try Self.created(stale) == created + 120)
        #expect(stale.headers.first(name: "signature") != first.headers.first(name: "signature"))
        #expect(stale.headers.first(name: "signature-input")?.contains(";expires=\(created + 120 + 150)") == true)
        #expect(stale.headers.first(name: "age") == "0")
        // The body, its digest and its tag do not change with the signature.
        #expect(stale.headers.first(name: "etag") == first.headers.first(name: "etag"))
        #expect(stale.headers.first(name: "content-digest") == first.headers.first(name: "content-digest"))
        #expect(
            variant.response(ifNoneMatch: [], head: false, now: created + 200).headers.first(name: "signature")
                == stale.headers.first(name: "signature"))
    }
}
