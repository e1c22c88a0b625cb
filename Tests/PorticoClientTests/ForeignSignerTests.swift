import Foundation
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import PorticoClient

/// The JVM and JavaScript signers (`clients/jvm`, `clients/js`) against the real gateway: each
/// language's live check signs with its own code and reports what the gateway answered (it decides
/// nothing itself); these tests hold the answers to the wire format's promises. A signed call is
/// accepted, the same signature on another path is refused as invalid, and a request sent twice is
/// refused the second time as a replay.
@Suite("The JVM and JavaScript signers against the gateway")
struct ForeignSignerTests {
    static let secretFile = Repository.root.appendingPathComponent("policies/secrets/demo-app.secret").path
    static let clients = Repository.root.appendingPathComponent("clients")

    /// One check's answer, as the live checks print it.
    struct Outcome: Decodable, Equatable {
        var status: Int
        var type: String?
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> [String: Outcome] {
        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let result = try await offThePool { try ChildProcess.run(executable, arguments, environment: merged) }
        let output = String(decoding: result.output, as: UTF8.self)
        #expect(result.termination == .exited(0), "\(output)\n\(String(decoding: result.errors, as: UTF8.self))")
        // The report is the last line that is a JSON object (a build may print before it).
        let line = try #require(output.split(separator: "\n").last { $0.hasPrefix("{") }, "no report in: \(output)")
        return try JSONDecoder().decode([String: Outcome].self, from: Data(line.utf8))
    }

    /// The JVM signer built once for this run (`clients/jvm/build.sh`): each live check then runs it
    /// without building, so two checks never see one rebuilding the classes the other is loading.
    static let jvmBuild: ChildProcess.Termination? = try? ChildProcess.run(
        "/bin/bash", [clients.appendingPathComponent("jvm/build.sh").path]
    ).termination

    static func runJVMLiveCheck(_ arguments: [String]) async throws -> [String: Outcome] {
        let built = try await offThePool { Self.jvmBuild }
        try #require(built == .exited(0), "clients/jvm/build.sh: \(String(describing: built))")
        return try await run(
            "/bin/bash", [clients.appendingPathComponent("jvm/live-check.sh").path] + arguments, environment: ["JVM_SKIP_BUILD": "1"])
    }

    /// What every live check must have seen.
    static func expectWireFormatHolds(_ report: [String: Outcome], _ language: String) {
        #expect(report["accepted"] == Outcome(status: 200, type: nil), "\(language): \(report)")
        #expect(report["tampered"] == Outcome(status: 401, type: "urn:portico:problem:signature-invalid"), "\(language): \(report)")
        #expect(report["replayFirst"] == Outcome(status: 200, type: nil), "\(language): \(report)")
        #expect(report["replayed"] == Outcome(status: 401, type: "urn:portico:problem:signature-replayed"), "\(language): \(report)")
    }

    static func arguments(base: String) -> [String] {
        ["--url", base, "--path", "/api/1/stockquote/AAPL", "--key-id", "demo-app", "--secret-file", secretFile, "--app-version", "1.4.0"]
    }

    @Test("Node: the JavaScript signer with fetch, over TLS with the development CA")
    func javaScriptInNode() async throws {
        try await FacadeFixture.run(tls: try await DevelopmentCertificates.listenerTLS()) { gateway, _, backends in
            let report = try await Self.run(
                "/usr/bin/env",
                ["node", Self.clients.appendingPathComponent("js/live-check.mjs").path]
                    + Self.arguments(base: "https://localhost:\(gateway.port)"),
                environment: ["NODE_EXTRA_CA_CERTS": DevelopmentCertificates.directory + "/ca.pem"])
            Self.expectWireFormatHolds(report, "node")
            // Only the two admitted requests reached the backend.
            #expect(backends[0].requestsReceived == 2)
        }
    }

    @Test("the JVM: the core signer through java.net.http and the OkHttp interceptor, over TLS with the development CA")
    func jvm() async throws {
        try await FacadeFixture.run(tls: try await DevelopmentCertificates.listenerTLS()) { gateway, _, backends in
            let report = try await Self.runJVMLiveCheck(
                Self.arguments(base: "https://localhost:\(gateway.port)") + ["--ca-file", DevelopmentCertificates.directory + "/ca.pem"])
            Self.expectWireFormatHolds(report, "jvm")
            #expect(report["okhttp"] == Outcome(status: 200, type: nil), "\(report)")
            #expect(backends[0].requestsReceived == 3)
        }
    }

    @Test("the JVM over plain HTTP with the JDK client's defaults: its h2c upgrade offer is ignored, and no request hangs")
    func jvmPlainHTTP() async throws {
        try await FacadeFixture.run { gateway, _, backends in
            let report = try await Self.runJVMLiveCheck(Self.arguments(base: "http://127.0.0.1:\(gateway.port)"))
            Self.expectWireFormatHolds(report, "jvm over http")
            #expect(report["okhttp"] == Outcome(status: 200, type: nil), "\(report)")
            #expect(backends[0].requestsReceived == 3)
        }
    }

    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(
        "headless Chromium: the JavaScript signer in a page on another origin, through the gateway's CORS",
        .enabled(if: chromium != nil, "chromium is not installed (scripts/install-deps.sh installs it)"))
    func javaScriptInChromium() async throws {
        try await FacadeFixture.run { gateway, _, backends in
            // The page's origin, on a port no one holds: the CORS policy must name it exactly.
            let pagePort = try Self.freePort()
            let allowed = FacadeFixture.policy(quotesPort: backends[0].port, echoPort: backends[1].port, gatewayPort: gateway.port)
                .replacingOccurrences(
                    of: "    auth: signature\n    versions:\n      1: { proxy: { backend: quotes",
                    with: """
                            auth: signature
                            cors: { origins: ["http://127.0.0.1:\(pagePort)"], methods: [GET], headers: [Signature-Input, Signature, Content-Digest, X-Client-Version, X-Client-Platform], exposeHeaders: [X-Request-Id, X-API-Version] }
                            versions:
                              1: { proxy: { backend: quotes
                        """)
            #expect(allowed.contains("cors:"))
            try gateway.reload(policy: allowed)
            let report = try await Self.run(
                "/bin/bash",
                [Self.clients.appendingPathComponent("js/browser-check.sh").path, "--gateway", "http://127.0.0.1:\(gateway.port)"]
                    + Self.arguments(base: "").dropFirst(2) + ["--page-port", "\(pagePort)", "--chromium", Self.chromium!])
            Self.expectWireFormatHolds(report, "chromium")
            #expect(backends[0].requestsReceived == 2)
        }
    }

    /// A loopback port free at this moment (bound, read and released).
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
