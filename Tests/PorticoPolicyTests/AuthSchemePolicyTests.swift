import Foundation
import PorticoPolicy
import Testing

/// `auth` lists, the `jwt` issuers, a service's `jwt` and `sigv4` settings and keys' access key ids.
@Suite("Authentication schemes in the policy: auth lists, JWT issuers, SigV4 scopes")
struct AuthSchemePolicyTests {
    static let base = """
        listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
        backends: { app: { url: "http://127.0.0.1:9" } }
        jwt:
          issuers:
            corp: { issuer: "https://id.example.com/", jwks: "https://id.example.com/jwks.json", audiences: [portico], algorithms: [ES256, RS256] }
        services:
          orders:
            path: /orders
            auth: [jwt, signature]
            jwt: { issuers: [corp], scopes: [orders.read], forwardClaims: { sub: X-User-Id } }
            versions: { 1: { proxy: { backend: app } } }
          reports:
            path: /reports
            auth: sigv4
            sigv4: { region: eu-west-1, service: reports }
            versions: { 1: { proxy: { backend: app } } }
        keys:
          build-bot: { accessKeyId: AKIDEXAMPLE, secret: "0123456789abcdefghijklmnopqrstuvwxyz", demo: true, services: [reports] }
        """

    @Test("the issue's shape reads: a list of schemes, issuers with their keys, scopes and forwarded claims, a SigV4 scope")
    func reads() throws {
        let policy = try PolicyLoader().load(sources: [(file: "p.yaml", text: Self.base)]).policy
        let orders = try #require(policy.services["orders"])
        #expect(orders.auth == [.jwt, .signature])
        #expect(orders.authDescription == "jwt,signature")
        #expect(orders.jwt?.issuers == ["corp"])
        #expect(orders.jwt?.forwardClaims.first?.field == "X-User-Id")
        let corp = try #require(policy.jwt.issuers["corp"])
        #expect(corp.keys == .url("https://id.example.com/jwks.json"))
        #expect(corp.algorithms == [.es256, .rs256])
        #expect(corp.clockSkew == .seconds(60))
        #expect(corp.requiredClaims == ["exp"])
        #expect(policy.services["reports"]?.sigv4 == ServiceSigV4Policy(region: "eu-west-1", service: "reports"))
        #expect(policy.keys["build-bot"]?.accessKeyID == "AKIDEXAMPLE")
    }

    static let broken: [(String, String, String)] = [
        ("auth: [jwt, signature]", "auth: [jwt, none]", "services.orders.auth.1: none cannot be listed with other schemes"),
        ("auth: [jwt, signature]", "auth: [jwt, jwt]", "services.orders.auth.1: jwt is listed twice"),
        ("auth: [jwt, signature]", "auth: []", "services.orders.auth: expected none"),
        (
            "algorithms: [ES256, RS256]", "algorithms: [ES256, HS256]",
            "jwt.issuers.corp.algorithms.1: HS256 cannot be accepted (HMAC tokens need a shared secret"
        ),
        (
            "algorithms: [ES256, RS256]", "algorithms: [none]",
            "jwt.issuers.corp.algorithms.0: none cannot be accepted (an unsigned token proves nothing)"
        ),
        (
            "issuers: [corp], scopes", "issuers: [corpx], scopes",
            "services.orders.jwt.issuers.0: unknown issuer \"corpx\"; expected one of: corp"
        ),
        (
            "    sigv4: { region: eu-west-1, service: reports }\n", "",
            "services.reports.auth: auth: sigv4 needs the service's sigv4 section"
        ),
        ("auth: sigv4", "auth: apiKey", "services.reports.sigv4: sigv4 settings on a service whose auth does not list sigv4"),
        (
            "forwardClaims: { sub: X-User-Id }", "forwardClaims: { sub: Host }",
            "services.orders.jwt.forwardClaims.sub: Host is a field the gateway sets or reads itself"
        ),
        (
            "jwks: \"https://id.example.com/jwks.json\"", "jwks: \"ftp://id.example.com/jwks.json\"",
            "jwt.issuers.corp.jwks: expected an http:// or https:// URL"
        ),
        ("jwks: \"https://id.example.com/jwks.json\", ", "", "jwt.issuers.corp: missing the issuer's keys: give jwks (a URL) or keysFile"),
        ("jwks: \"https://id.example.com/jwks.json\"", "keysFile: missing.json", "jwt.issuers.corp.keysFile: cannot read the JWK Set file"),
        ("audiences: [portico]", "audiences: []", "jwt.issuers.corp.audiences: expected at least one audience, or \"*\""),
        ("region: eu-west-1", "region: \"eu/west\"", "services.reports.sigv4.region: expected a credential-scope name"),
        ("accessKeyId: AKIDEXAMPLE", "accessKeyId: \"AKID/X\"", "keys.build-bot.accessKeyId: expected an access key id"),
    ]

    static let moreBroken: [(String, String, String)] = [
        (
            "jwks: \"https://id.example.com/jwks.json\"", "jwks: \"http://id.example.com/jwks.json\", caFile: ca.pem",
            "jwt.issuers.corp.caFile: caFile checks the certificate of an https:// jwks URL; this one is plain HTTP"
        ),
        (
            "forwardClaims: { sub: X-User-Id }", "forwardClaims: { sub: X-Forwarded-Proto }",
            "services.orders.jwt.forwardClaims.sub: X-Forwarded-Proto is a field the gateway sets or reads itself"
        ),
    ]

    @Test("each mistake names the file and key path", arguments: broken + moreBroken)
    func mistakes(replacing: String, with replacement: String, expected: String) throws {
        let text = Self.base.replacingOccurrences(of: replacing, with: replacement)
        #expect(text != Self.base, "the replacement did not apply")
        do {
            _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: text)])
            Issue.record("accepted: \(replacement)")
        } catch {
            let lines = error.diagnostics.map(\.description)
            #expect(lines.contains { $0.hasPrefix("p.yaml:") && $0.contains(expected) }, "\(lines)")
        }
    }

    @Test("a JWK Set file none of whose keys the issuer's algorithms could use is refused at load, naming the file")
    func unusableKeysFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-jwks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("keys.json").path
        try #"{"keys":[{"kid":"h","kty":"oct","k":"c2VjcmV0"},{"kid":"e","kty":"EC","crv":"P-256","x":"AA","y":"AA","use":"enc"}]}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let text = Self.base.replacingOccurrences(of: "jwks: \"https://id.example.com/jwks.json\"", with: "keysFile: \"\(file)\"")
        do {
            _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: text)])
            Issue.record("accepted a key set with no usable key")
        } catch {
            #expect(
                error.diagnostics.map(\.description).contains {
                    $0.contains("jwt.issuers.corp.keysFile: \(file) holds no key usable with ES256, RS256")
                })
        }
    }

    @Test("two keys with one access key id are refused")
    func duplicateAccessKeys() {
        let text =
            Self.base + """

                  other: { accessKeyId: AKIDEXAMPLE, secret: "abcdefghijklmnopqrstuvwxyz0123456789", demo: true, services: [reports] }
                """
        do {
            _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: text)])
            Issue.record("accepted two keys with one access key id")
        } catch {
            #expect(
                error.diagnostics.map(\.description).contains {
                    $0.contains("keys.other.accessKeyId: access key id AKIDEXAMPLE is already key build-bot's")
                })
        }
    }
}
