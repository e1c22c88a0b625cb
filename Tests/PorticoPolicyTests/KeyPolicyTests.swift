import Foundation
import Testing

@testable import PorticoPolicy

@Suite("Keys, secrets and authentication settings in the policy")
struct KeyPolicyTests {
    static let secret = "0123456789abcdefghijklmnopqrstuvwxyzABCD"

    /// A policy directory in a temporary location, removed afterwards.
    static func withDirectory(_ files: [String: String], _ body: (String) throws -> Void) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-keys-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory + "/secrets", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for (name, text) in files { try text.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8) }
        try body(directory)
    }

    static let base = """
        listeners: [{ name: public, port: 0 }]
        backends: { echo: { url: "http://127.0.0.1:1" } }
        services:
          signed: { path: /signed, auth: signature, versions: { 1: { proxy: { backend: echo } } } }
          open: { path: /open, versions: { 1: { proxy: { backend: echo } } } }

        """

    @Test("secrets come from a file (relative to the policy, trailing newline trimmed) or the environment")
    func secretSources() throws {
        try Self.withDirectory([
            "gateway.yaml": Self.base,
            "keys.yaml": """
            tiers:
              standard: { rate: 50/s, burst: 20 }
            keys:
              from-file: { secretFile: secrets/app.secret, services: [signed], tier: standard }
              from-env: { secretEnv: PORTICO_TEST_SECRET, services: ["*"], status: revoked }
            """,
            "secrets/app.secret": Self.secret + "\n",
        ]) { directory in
            let snapshot = try PolicyLoader(environment: ["PORTICO_TEST_SECRET": Self.secret + "-env"]).load(directory: directory)
            let keys = snapshot.policy.keys
            #expect(keys["from-file"]?.secret == Secret(Self.secret))
            #expect(keys["from-file"]?.tier == "standard")
            #expect(keys["from-file"]?.mayCall(service: "signed") == true)
            #expect(keys["from-file"]?.mayCall(service: "open") == false)
            #expect(keys["from-env"]?.secret == Secret(Self.secret + "-env"))
            #expect(keys["from-env"]?.status == .revoked)
            #expect(keys["from-env"]?.mayCall(service: "open") == true)
            #expect(snapshot.policy.services["signed"]?.auth == [.signature])
            #expect(snapshot.policy.services["open"]?.auth == [])
            #expect(snapshot.warnings.isEmpty)
        }
    }

    @Test("a secret never appears in a description")
    func secretDescriptions() {
        let secret = Secret(Self.secret)
        #expect(!"\(secret)".contains("0123"))
        #expect(!String(reflecting: secret).contains("0123"))
    }

    @Test("demo keys may hold an inline secret and are flagged; others may not")
    func demoKeys() throws {
        let demo = try PolicyLoader().load(sources: [
            (file: "p.yaml", text: Self.base + "keys:\n  demo-app: { secret: \"\(Self.secret)\", demo: true, services: [signed] }\n")
        ])
        #expect(
            demo.warnings.map(\.description) == [
                "p.yaml:7: keys.demo-app: demo key: its secret is published with this policy; never let it guard real traffic"
            ])
        #expect(throws: PolicyError.self) {
            try PolicyLoader().load(sources: [
                (file: "p.yaml", text: Self.base + "keys:\n  app: { secret: \"\(Self.secret)\", services: [signed] }\n")
            ])
        }
    }

    @Test("API-key services on a plain-HTTP listener other machines can reach are flagged")
    func clearTextKeys() throws {
        let services = "services:\n  keyed: { path: /k, auth: apiKey, versions: { 1: { proxy: { backend: echo } } } }\n"
        let backends = "backends: { echo: { url: \"http://127.0.0.1:1\" } }\n"
        let exposed = try PolicyLoader().load(sources: [
            (
                file: "p.yaml",
                text: "listeners:\n  - { name: lan, address: 0.0.0.0, port: 80 }\n  - { name: loop, port: 81 }\n" + backends + services
            )
        ])
        #expect(
            exposed.warnings.map(\.description) == [
                "p.yaml:2: listeners.0: plain HTTP on 0.0.0.0 while services use auth: apiKey, whose secrets would cross the network in clear; add tls"
            ])
        // Listeners in two files are reported once, warning or not.
        do {
            _ = try PolicyLoader().load(sources: [
                (file: "a.yaml", text: "listeners:\n  - { name: lan, address: 0.0.0.0, port: 80 }\n" + backends + services),
                (file: "b.yaml", text: "listeners:\n  - { name: other, port: 81 }\n"),
            ])
            Issue.record("accepted listeners defined in two files")
        } catch {
            #expect(error.diagnostics.filter { $0.description.contains("defined again") }.count == 1, "\(error.diagnostics)")
        }
    }

    static let brokenKeys: [(String, String)] = [
        ("keys:\n  app: { secret: \"\(secret)\", services: [signed] }\n", "keys.app.secret: an inline secret is allowed on demo keys only"),
        (
            "keys:\n  app: { secret: short, demo: true, services: [signed] }\n",
            "keys.app.secret: the secret is 5 characters; at least 32 are required"
        ),
        (
            "keys:\n  app: { secretFile: /nonexistent/app.secret, services: [signed] }\n",
            "keys.app.secretFile: the secret file /nonexistent/app.secret does not exist or cannot be opened"
        ),
        // A device or a directory is refused before a byte is read: /dev/zero would never end.
        (
            "keys:\n  app: { secretFile: /dev/zero, services: [signed] }\n",
            "keys.app.secretFile: the secret file /dev/zero is not a regular file"
        ),
        (
            "keys:\n  app: { secretFile: /tmp, services: [signed] }\n",
            "keys.app.secretFile: the secret file /tmp is not a regular file"
        ),
        (
            "keys:\n  app: { secretEnv: PORTICO_SURELY_UNSET_VARIABLE, services: [signed] }\n",
            "keys.app.secretEnv: the environment variable PORTICO_SURELY_UNSET_VARIABLE is not set"
        ),
        ("keys:\n  app: { services: [signed] }\n", "keys.app: missing the secret"),
        (
            "keys:\n  app: { secretFile: a, secretEnv: B, services: [signed] }\n",
            "keys.app: give only one of secret, secretFile and secretEnv"
        ),
        ("keys:\n  app: { secret: \"\(secret)\", demo: true, services: [nope] }\n", "keys.app.services.0: unknown service \"nope\""),
        (
            "keys:\n  app: { secret: \"\(secret)\", demo: true, services: [signed], status: paused }\n",
            "keys.app.status: expected one of active, revoked"
        ),
        (
            "keys:\n  app.v2: { secret: \"\(secret)\", demo: true, services: [signed] }\n",
            "keys.app.v2: key id \"app.v2\" must be visible ASCII characters other than '.'"
        ),
        (
            "keys:\n  app: { secret: \"\(secret)\", demo: true, services: [signed], previousSecret: { secret: \"\(secret)x\", expires: tomorrow } }\n",
            "keys.app.previousSecret.expires: expected a timestamp such as 2026-12-01T00:00:00Z"
        ),
        ("signatures: { maxClockSkew: never }\n", "signatures.maxClockSkew: expected a positive duration"),
        ("signatures: { label: Sig1 }\n", "signatures.label: expected a structured-field key"),
        ("signatures: { requiredComponents: [\"@Method\"] }\n", "signatures.requiredComponents.0: expected a lowercase component name"),
        ("apiKeys: { header: \"X Key\" }\n", "apiKeys.header: expected a header field name"),
    ]

    @Test("mistakes in keys and authentication settings name the file and key path, never the secret")
    func brokenKeyPolicies() throws {
        for (yaml, expected) in Self.brokenKeys {
            do {
                _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: Self.base + yaml)])
                Issue.record("accepted: \(yaml)")
            } catch {
                let lines = error.diagnostics.map(\.description)
                #expect(lines.contains { $0.hasPrefix("p.yaml:") && $0.contains(expected) }, "\(lines)")
                #expect(!lines.joined().contains(Self.secret), "a diagnostic shows the secret: \(lines)")
            }
        }
        let badAuth = Self.base.replacingOccurrences(of: "auth: signature", with: "auth: oauth")
        do {
            _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: badAuth)])
            Issue.record("accepted auth: oauth")
        } catch {
            #expect(
                error.diagnostics.map(\.description).contains {
                    $0.contains("services.signed.auth: expected one of none, apiKey, signature, jwt, sigv4, found oauth")
                })
        }
    }

    @Test("a secret file is read through symbolic links, and one larger than a secret needs is refused")
    func secretFileShapes() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-secret-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let real = directory.appendingPathComponent("real.secret")
        try "\(Self.secret)\n".write(to: real, atomically: true, encoding: .utf8)
        let link = directory.appendingPathComponent("link.secret")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: real)
        #expect(Secret.text(ofFile: link.path) == Self.secret)
        let huge = directory.appendingPathComponent("huge.secret")
        try String(repeating: "x", count: Secret.maxFileBytes + 1).write(to: huge, atomically: true, encoding: .utf8)
        #expect(Secret.read(file: huge.path) == .failure(.tooLarge(bytes: Secret.maxFileBytes + 1)))
    }
}
