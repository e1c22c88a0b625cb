import Foundation
import Portico
import PorticoCrypto
import PorticoTestSupport
import PorticoTesting
import Testing

/// The `portico` executable, built beside the test bundle by `swift test`.
func porticoExecutable() throws -> URL {
    var directory = Bundle.main.bundleURL
    for _ in 0..<3 {
        let candidate = directory.appendingPathComponent("portico")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    throw CocoaError(.fileNoSuchFile)
}

private func run(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
    try runTool(try porticoExecutable().path, arguments)
}

/// Runs a program to completion, collecting what it prints.
private func runTool(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
    let result = try ChildProcess.run(path, arguments)
    guard case .exited(let status) = result.termination else { throw ChildEnded(termination: result.termination) }
    return (status, String(decoding: result.output, as: UTF8.self), String(decoding: result.errors, as: UTF8.self))
}

/// A child that a signal ended, where an exit status was expected.
struct ChildEnded: Error {
    var termination: ChildProcess.Termination
}

@Suite("The portico command")
struct CommandLineTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The exit status of `certs/make-dev-certs.sh`, run once for every test that checks the shipped
    /// policy (which names those certificates): what `make run` does first on a fresh clone. Once,
    /// because tests run in parallel and two runs would write the same files.
    static let developmentCertificates: Int32 = {
        let script = repositoryRoot.appendingPathComponent("certs/make-dev-certs.sh").path
        guard let result = try? ChildProcess.run("/bin/bash", [script]), case .exited(let status) = result.termination else { return -1 }
        return status
    }()

    @Test("portico check accepts the shipped policy, development certificates included")
    func checkShippedPolicy() throws {
        #expect(Self.developmentCertificates == 0)
        let result = try run(["check", Self.repositoryRoot.appendingPathComponent("policies").path])
        #expect(result.status == 0, "\(result.errors)")
        // quotes, echo, the four facade feeds and the live one; stockQuote, weather, echo, chat and ticks
        #expect(result.output.contains("OK — 2 listener(s), 7 backend(s), 5 service(s)"), "\(result.output)")
        #expect(result.output.contains("keys.yaml:9: keys.demo-app: demo key"))
    }

    @Test("portico check flags the shipped locator demo key; keygen --ed25519 makes a key that locator-key reads")
    func locatorKeys() throws {
        #expect(Self.developmentCertificates == 0)
        let shipped = try run(["check", Self.repositoryRoot.appendingPathComponent("policies").path])
        #expect(
            shipped.output.contains(
                "gateway.yaml:61: locator.signingKey: demo key: its private key is published with this policy, so its signature proves nothing"
            ),
            "\(shipped.output)")

        let generated = try run(["keygen", "--ed25519"])
        #expect(generated.status == 0)
        #expect(generated.output.hasPrefix("-----BEGIN PRIVATE KEY-----\n") && generated.output.hasSuffix("-----END PRIVATE KEY-----\n"))
        #expect(try run(["keygen", "--ed25519"]).output != generated.output)
        let key = try Ed25519SigningKey(pem: generated.output)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-locator-key-\(UUID())")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("secrets"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try generated.output.write(to: directory.appendingPathComponent("secrets/locator.pem"), atomically: true, encoding: .utf8)
        try """
        listeners:
          - { name: public, port: 8080 }
        locator: { publicBaseURL: "https://api.example.com", signingKey: secrets/locator.pem, keyId: app-key-1 }
        """.write(to: directory.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        let printed = try run(["locator-key", directory.path])
        #expect(printed.status == 0, "\(printed.errors)")
        let lines = printed.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "keyid: app-key-1")
        #expect(lines.dropFirst().first == "ed25519 public key (base64url, 32 bytes): \(LocatorSigning.base64URL(key.publicKey))")
        #expect(printed.output.hasSuffix(key.publicKeyPEM!))
        #expect(!printed.output.contains("PRIVATE"))

        try "garbage".write(to: directory.appendingPathComponent("secrets/locator.pem"), atomically: true, encoding: .utf8)
        let broken = try run(["check", directory.path])
        #expect(broken.status == 1)
        #expect(broken.errors.contains("gateway.yaml:3: locator.signingKey: "), "\(broken.errors)")
        #expect(broken.errors.contains("not a PEM private key"))
    }

    @Test("portico keygen prints a fresh 32-byte base64url secret each time")
    func keygen() throws {
        let first = try run(["keygen"])
        let second = try run(["keygen"])
        #expect(first.status == 0)
        let secret = first.output.trimmingCharacters(in: .newlines)
        #expect(secret.count == 43)
        #expect(secret.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(secret != second.output.trimmingCharacters(in: .newlines))
        #expect(try run(["keygen", "--bytes", "16"]).status != 0)
    }

    @Test("portico sign prints fields the gateway accepts, and never the secret")
    func sign() async throws {
        let secretFile = try Self.secretFile()
        defer { try? FileManager.default.removeItem(at: secretFile) }
        try await withGateway(policy: SignatureAuthTests.policy) { gateway, _ in
            let body = #"{"order": 7}"#
            let result = try run([
                "sign", "--key-id", "app-one", "--secret-file", secretFile.path, "-X", "POST", "-H", "Content-Type: application/json",
                "--data", body, "http://gateway.test/signed/orders?id=7",
            ])
            #expect(result.status == 0, "\(result.errors)")
            #expect(!result.output.contains(SignatureAuthTests.appSecret))
            let fields = result.output.split(separator: "\n").map { line -> (String, String) in
                let colon = line.firstIndex(of: ":")!
                return (String(line[..<colon]), String(line[line.index(colon, offsetBy: 2)...]))
            }
            #expect(fields.map(\.0) == ["Signature-Input", "Signature", "Content-Digest"])
            let response = try gateway.connect().request(
                "POST", "/signed/orders?id=7", headers: [("Content-Type", "application/json")] + fields, body: body)
            #expect(response.status == 200, "\(response.bodyText)")
        }
        let noSecret = try run(["sign", "--key-id", "app-one", "http://gateway.test/"])
        #expect(noSecret.status != 0)
        #expect(noSecret.errors.contains("exactly one of --secret-file and --secret-env"))
    }

    @Test("portico sign's fields, sent by the curl command-line tool, get a 200; a second send is a replay")
    func signThenCurl() async throws {
        let secretFile = try Self.secretFile()
        defer { try? FileManager.default.removeItem(at: secretFile) }
        try await withGateway(policy: SignatureAuthTests.policy) { gateway, _ in
            for (method, data) in [("GET", nil), ("POST", #"{"symbol": "AAPL"}"#), ("DELETE", nil)] as [(String, String?)] {
                let url = "http://127.0.0.1:\(gateway.port)/signed/orders/a%20b?id=7&q=caf%C3%A9"
                var arguments = [
                    "sign", "--key-id", "app-one", "--secret-file", secretFile.path, "-X", method, "-H", "X-Client-Version: 3.1.0",
                ]
                if let data { arguments += ["--data", data] }
                let signed = try run(arguments + [url])
                #expect(signed.status == 0, "\(signed.errors)")
                var curl = ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, "-H", "X-Client-Version: 3.1.0"]
                for line in signed.output.split(separator: "\n") { curl += ["-H", String(line)] }
                if let data { curl += ["--data-binary", data] }
                #expect(try runTool("/usr/bin/curl", curl + [url]).output == "200", "\(method) \(signed.output)")
                #expect(try runTool("/usr/bin/curl", curl + [url]).output == "401", "a replayed \(method) must be refused")
            }
        }
    }

    @Test("portico call signs and sends: 200 with the body, -i adds status and headers, a refusal exits 22")
    func call() async throws {
        let secretFile = try Self.secretFile()
        defer { try? FileManager.default.removeItem(at: secretFile) }
        let wrongSecret = FileManager.default.temporaryDirectory.appendingPathComponent("portico-call-\(UUID()).secret")
        try "not-the-secret-0123456789abcdefghijklmnopqrstuvwxyz".write(to: wrongSecret, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: wrongSecret) }
        try await withGateway(policy: SignatureAuthTests.policy) { gateway, _ in
            let base = "http://127.0.0.1:\(gateway.port)"
            let key = ["--key-id", "app-one", "--secret-file", secretFile.path]
            let get = try run(["call"] + key + ["\(base)/signed/items?x=1"])
            #expect(get.status == 0, "\(get.errors)")
            let echoed = try JSONSerialization.jsonObject(with: Data(get.output.utf8)) as? [String: Any]
            #expect(echoed?["path"] as? String == "/signed/items")
            #expect(echoed?["query"] as? String == "x=1")

            let post = try run(
                ["call"] + key + ["-i", "-X", "POST", "-H", "Content-Type: text/plain", "--data", "hello", "\(base)/signed/notes"])
            #expect(post.status == 0, "\(post.errors)")
            #expect(post.output.hasPrefix("HTTP 200\n"))
            #expect(post.output.lowercased().contains("\nx-api-version: 1\n"))
            let postBody = try #require(post.output.split(separator: "\n\n", maxSplits: 1).last)
            let postEchoed = try JSONSerialization.jsonObject(with: Data(postBody.utf8)) as? [String: Any]
            #expect(postEchoed?["body"] as? String == "hello")
            #expect(postEchoed?["method"] as? String == "POST")

            let refused = try run(["call", "--key-id", "app-one", "--secret-file", wrongSecret.path, "\(base)/signed/items"])
            #expect(refused.status == 22)
            #expect(refused.errors.contains("HTTP 401"))
            #expect(refused.output.contains("urn:portico:problem:signature-invalid"))
            #expect(
                try run(["call", "--no-fail", "--key-id", "app-one", "--secret-file", wrongSecret.path, "\(base)/signed/items"]).status == 0
            )

            let unreachable = try run(["call"] + key + ["http://127.0.0.1:9/signed/items"])
            #expect(unreachable.status != 0 && unreachable.status != 22)
            #expect(unreachable.errors.contains("the request failed"))
        }
    }

    static func secretFile() throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("portico-cli-\(UUID()).secret")
        try (SignatureAuthTests.appSecret + "\n").write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test("portico check lists every mistake of a broken policy and exits non-zero")
    func checkBrokenPolicy() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-check-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try """
        listeners:
          - { name: public, port: 8080 }
        limits: { idleTimeout: never }
        services:
          s: { path: /s, versions: { 1: { proxy: { backend: missing } } } }
        """.write(to: directory.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        let result = try run(["check", directory.path])
        #expect(result.status == 1)
        let lines = result.errors.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(lines)")
        #expect(
            lines[0].hasSuffix("gateway.yaml:3: limits.idleTimeout: expected a positive duration such as 500ms, 10s or 5m, found never"))
        #expect(
            lines[1].hasSuffix(
                "gateway.yaml:5: services.s.versions.1.proxy.backend: unknown backend \"missing\"; expected one of: (no backends defined)"))
        #expect(lines[2].hasSuffix(": 2 error(s)"))
    }

    @Test("portico check names the exact versions of overlapping buckets (errors) and of gaps (warnings)")
    func checkBuckets() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-check-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let policy = """
            listeners:
              - { name: public, port: 8080 }
            backends:
              b: { url: "http://127.0.0.1:18081" }
            services:
              s:
                path: /api/{version}/s
                versions: { 1: { proxy: { backend: b } }, 2: { proxy: { backend: b } }, 3: { proxy: { backend: b } } }
                compatibility:
                  - { clients: "<2.0.0", version: 1 }
                  - { clients: ">=2.2.0 <3.1.0", version: 2 }
                  - { clients: ">=3.1.0", version: 3 }
                minimumClientVersion: 1.0.0
            """
        let file = directory.appendingPathComponent("gateway.yaml")
        try policy.write(to: file, atomically: true, encoding: .utf8)
        let gapped = try run(["check", directory.path])
        #expect(gapped.status == 0, "\(gapped.errors)")
        #expect(
            gapped.output.contains(
                "warning: \(file.path):10: services.s.compatibility: versions >=2.0.0 <2.2.0 are in no bucket; they get the default version 3"
            ),
            "\(gapped.output)")

        try policy.replacingOccurrences(of: ">=3.1.0\"", with: ">=3.0.0\"").write(to: file, atomically: true, encoding: .utf8)
        let overlapping = try run(["check", directory.path])
        #expect(overlapping.status == 1)
        #expect(
            overlapping.errors.contains(
                "error: \(file.path):12: services.s.compatibility.2: overlaps bucket 1 (>=2.2.0 <3.1.0 → 2): versions >=3.0.0 <3.1.0 are in both"
            ),
            "\(overlapping.errors)")
    }
}
