import Foundation
import Testing

/// The `portico` executable, built beside the test bundle by `swift test`.
private func porticoExecutable() throws -> URL {
    var directory = Bundle.main.bundleURL
    for _ in 0..<3 {
        let candidate = directory.appendingPathComponent("portico")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    throw CocoaError(.fileNoSuchFile)
}

private func run(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
    let process = Process()
    process.executableURL = try porticoExecutable()
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    let outData = output.fileHandleForReading.readDataToEndOfFile()
    let errData = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
}

@Suite("The portico command")
struct CommandLineTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    @Test("portico check accepts the shipped policy, development certificates included")
    func checkShippedPolicy() throws {
        // What `make run` does first on a fresh clone.
        let certificates = Process()
        certificates.executableURL = URL(fileURLWithPath: "/bin/bash")
        certificates.arguments = [Self.repositoryRoot.appendingPathComponent("certs/make-dev-certs.sh").path]
        certificates.standardOutput = Pipe()
        try certificates.run()
        certificates.waitUntilExit()
        #expect(certificates.terminationStatus == 0)

        let result = try run(["check", Self.repositoryRoot.appendingPathComponent("policies").path])
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.output.contains("OK — 2 listener(s), 2 backend(s), 2 service(s)"))
        #expect(result.output.contains("keys.yaml:9: keys.demo-app: demo key"))
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
        let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("portico-sign-\(UUID()).secret")
        try (SignatureAuthTests.appSecret + "\n").write(to: secretFile, atomically: true, encoding: .utf8)
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
}
