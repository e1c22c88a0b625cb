import Foundation
import Logging
import NIOCore
import PorticoDemoBackends
import PorticoSigning
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

/// WebSocket through the gateway with Python's `websockets` (installed by
/// `scripts/interop/setup.sh`) at both ends: a real client in front of the gateway and a real
/// echo server behind it, so the handshake and the frames are checked by code no one here wrote.
@Suite("WebSocket through the gateway", .timeLimit(.minutes(4)))
struct WebSocketTests {
    static let script = InteropTests.repositoryRoot.appendingPathComponent("scripts/interop/websocket-peer.py").path
    static let installed = Repository.interopPythonImports("websockets")
    static let appKey = "app-one.\(SignedServicesFixture.appSecret)"

    /// What the Python client printed.
    struct Report: Decodable {
        var subprotocol: String?
        var extensions: [String]?
        var echoed: Int?
        var mismatch: [String: String]?
        var pong: Bool?
        var whoami: WhoAmI?
        var whoami_raw: String?
        var first: String?
        var status: Int?
        var body: String?
        var headers: [String: String]?
        var received_code: Int?
        var received_reason: String?
    }

    struct WhoAmI: Decodable {
        var path: String
        var headers: [String: String?]
    }

    /// The echo server, in a child process until its standard input closes; with `tls`, serving
    /// `wss://` with the tests' `localhost` certificate.
    static func server(tls: Bool = false) throws -> AnnouncedServer {
        let certificate = tls ? [TestCertificates.path("localhost.pem"), TestCertificates.path("localhost-key.pem")] : []
        return try AnnouncedServer(InteropTests.python!, [script, "server"] + certificate)
    }

    static func policy(backendPort: Int, keyStatus: String = "active") -> String {
        """
        limits: { authFailures: off }
        backends:
          chat: { url: "http://127.0.0.1:\(backendPort)", timeout: 30s }
        services:
          chat:
            path: /chat
            auth: apiKey
            websocket: true
            versions: { 1: { proxy: { backend: chat, rewrite: /room } } }
          limited:
            path: /limited
            auth: apiKey
            websocket: true
            limits: { maxUpgraded: 1 }
            versions: { 1: { proxy: { backend: chat } } }
          quiet:
            path: /quiet
            websocket: true
            limits: { streamIdleTimeout: 3s }
            versions: { 1: { proxy: { backend: chat } } }
          brief:
            path: /brief
            websocket: true
            limits: { streamMaxLifetime: 2s }
            versions: { 1: { proxy: { backend: chat } } }
          plain:
            path: /plain
            versions: { 1: { proxy: { backend: chat } } }
          signed:
            path: /signed
            auth: signature
            websocket: true
            versions: { 1: { proxy: { backend: chat } } }
        signatures: { maxClockSkew: 300s, requireNonce: true }
        tiers:
          standard: { rate: 10000/s, burst: 10000, maxUpgraded: 2 }
        keys:
          app-one: { secret: "\(SignedServicesFixture.appSecret)", demo: true, services: ["*"], tier: standard, status: \(keyStatus) }
        """
    }

    /// Runs the Python client in `mode` against `path` on the gateway (off the cooperative pool);
    /// with `tls`, over `wss://localhost`, trusting the tests' CA.
    static func client(_ mode: String, port: Int, path: String, headers: [String: String] = [:], tls: Bool = false) async throws -> Report {
        let fields = String(decoding: try JSONEncoder().encode(headers), as: UTF8.self)
        let url = tls ? "wss://localhost:\(port)\(path)" : "ws://127.0.0.1:\(port)\(path)"
        let environment = ProcessInfo.processInfo.environment.merging(["PEER_CA": TestCertificates.path("ca.pem")]) { $1 }
        let result = try await offThePool {
            try ChildProcess.run(InteropTests.python!, [script, "client", mode, url, fields], environment: environment)
        }
        try #require(result.termination == .exited(0), "\(String(decoding: result.errors, as: UTF8.self))")
        return try JSONDecoder().decode(Report.self, from: result.output)
    }

    /// - Parameter listener: the test listener's extra settings (`protocols: [http/1.1, h2c]`).
    static func withGateway(
        logger: Logger? = nil, listener: String? = nil, _ body: (_ gateway: TestGateway, _ server: AnnouncedServer) async throws -> Void
    ) async throws {
        let server = try Self.server()
        defer { server.stop() }
        try #require(server.port > 0)
        let gateway = try await TestGateway.start(policy: policy(backendPort: server.port), logger: logger, listener: listener)
        do {
            try await body(gateway, server)
        } catch {
            await gateway.shutdown()
            throw error
        }
        await gateway.shutdown()
    }

    @Test(
        "text and binary messages of 0 B to 4 MiB, a ping and a close pass through both ways; the stream is one access-log line",
        .enabled(if: installed))
    func echo() async throws {
        let recorder = RecordingLogHandler()
        try await Self.withGateway(logger: Logger(label: "portico.test") { _ in recorder }) { gateway, _ in
            let report = try await Self.client("echo", port: gateway.port, path: "/chat/general?x=1", headers: ["X-API-Key": Self.appKey])
            #expect(report.mismatch == nil)
            #expect(report.echoed == 14)
            #expect(report.pong == true)
            #expect(report.subprotocol == "chat.v1")
            // The backend saw the rewritten path and the gateway's forwarding fields, not the key.
            #expect(report.whoami?.path == "/room/general?x=1")
            #expect(report.whoami?.headers["x-forwarded-for"] == "127.0.0.1")
            #expect((report.whoami?.headers["x-request-id"] ?? nil) != nil)
            #expect(report.whoami?.headers["x-api-key"] == .some(nil))
            #expect(report.whoami?.headers["sec-websocket-protocol"] == "chat.v1")
            #expect(report.received_code == 1000)
            let logged = await eventually { recorder.records.contains { $0.metadata["stream_end"] != nil } }
            #expect(logged)
            let line = try #require(recorder.records.first { $0.metadata["stream_end"] != nil })
            #expect(line.metadata["status"]?.description == "101")
            #expect(line.metadata["service"]?.description == "chat")
            #expect(line.metadata["key"]?.description == "app-one")
            // Both 4 MiB messages went each way, framed (so a little more).
            let sent = Int(line.metadata["bytes_in"]?.description ?? "") ?? 0
            let received = Int(line.metadata["bytes"]?.description ?? "") ?? 0
            #expect(sent > 8 << 20 && received > 8 << 20, "\(line.metadata)")
            // The client's close frame began the closing handshake, whoever hung up first.
            #expect(line.metadata["stream_end"]?.description == "client closed")
            #expect(gateway.gateway.streams.count(service: "chat") == 0)
        }
    }

    @Test("a close from the backend, and a message it sends before the client's first, reach the client", .enabled(if: installed))
    func backendSide() async throws {
        try await Self.withGateway { gateway, _ in
            let closed = try await Self.client("server-closes", port: gateway.port, path: "/chat", headers: ["X-API-Key": Self.appKey])
            #expect(closed.received_code == 1000)
            #expect(closed.received_reason == "bye")
            let greeted = try await Self.client("greeted", port: gateway.port, path: "/chat/x?greet=1", headers: ["X-API-Key": Self.appKey])
            #expect(greeted.first == "hello from the backend")
            // The extension the client offered and the backend chose is passed on as chosen.
            #expect(greeted.extensions == ["permessage-deflate"])
        }
    }

    @Test(
        "the handshake is authenticated like any request; a service without websocket: true never switches",
        .enabled(if: installed))
    func refusals() async throws {
        try await Self.withGateway { gateway, _ in
            let anonymous = try await Self.client("refused", port: gateway.port, path: "/chat")
            #expect(anonymous.status == 401)
            #expect(anonymous.headers?["content-type"] == "application/problem+json")
            let wrongKey = try await Self.client("refused", port: gateway.port, path: "/chat", headers: ["X-API-Key": "app-one.wrong"])
            #expect(wrongKey.status == 401)
            // Forwarded as a plain GET (no Upgrade): the backend, a WebSocket server, refuses it.
            let plain = try await Self.client("refused", port: gateway.port, path: "/plain")
            #expect(plain.status == 426, "\(plain)")
        }
    }

    @Test(
        "maxUpgraded refuses a second stream with 429; the gateway's shutdown closes the open one with 1001",
        .enabled(if: installed))
    func limitAndShutdown() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let gateway = try await TestGateway.start(policy: Self.policy(backendPort: server.port))
        let port = gateway.port
        let waiting = Task { try await Self.client("wait", port: port, path: "/limited", headers: ["X-API-Key": Self.appKey]) }
        let open = await eventually { gateway.gateway.streams.count(service: "limited") == 1 }
        #expect(open)
        let second = try await Self.client("refused", port: port, path: "/limited", headers: ["X-API-Key": Self.appKey])
        #expect(second.status == 429)
        #expect(second.body?.contains("too-many-streams") == true, "\(second)")
        await gateway.gateway.shutdown(gracePeriod: .milliseconds(200))
        let first = try await waiting.value
        #expect(first.first == "hello")
        #expect(first.received_code == 1001)
        #expect(gateway.gateway.streams.count(service: "limited") == 0)
    }

    @Test("a stream idle too long, or open past its lifetime, is closed with 1001", .enabled(if: installed))
    func idleAndLifetime() async throws {
        try await Self.withGateway { gateway, _ in
            let idle = try await Self.client("wait", port: gateway.port, path: "/quiet")
            #expect(idle.first == "hello")
            #expect(idle.received_code == 1001)
            let brief = try await Self.client("wait", port: gateway.port, path: "/brief")
            #expect(brief.received_code == 1001)
        }
    }

    @Test("a reload that revokes the key closes its open stream with 1008", .enabled(if: installed))
    func revoked() async throws {
        try await Self.withGateway { gateway, server in
            let port = gateway.port
            let waiting = Task { try await Self.client("wait", port: port, path: "/chat", headers: ["X-API-Key": Self.appKey]) }
            let open = await eventually { gateway.gateway.streams.count(service: "chat") == 1 }
            #expect(open)
            let revoked = try TestGateway.snapshot(policy: Self.policy(backendPort: server.port, keyStatus: "revoked"), accessLog: false)
            _ = try gateway.gateway.install(revoked, contentHash: "revoked")
            let report = try await waiting.value
            #expect(report.received_code == 1008)
        }
    }

    @Test("over TLS at both ends: wss:// to the gateway, and the gateway to an https:// backend it verifies", .enabled(if: installed))
    func tlsBothWays() async throws {
        let server = try Self.server(tls: true)
        defer { server.stop() }
        try #require(server.port > 0)
        let gateway = try await TestGateway.start(
            policy: """
                backends:
                  chat: { url: "https://localhost:\(server.port)", caFile: "\(TestCertificates.path("ca.pem"))" }
                  stranger: { url: "https://localhost:\(server.port)", caFile: "\(TestCertificates.path("foreign-ca.pem"))" }
                services:
                  chat: { path: /chat, websocket: true, versions: { 1: { proxy: { backend: chat } } } }
                  stranger: { path: /stranger, websocket: true, versions: { 1: { proxy: { backend: stranger } } } }
                """, tls: TestCertificates.listenerTLS())
        do {
            let report = try await Self.client("echo", port: gateway.port, path: "/chat", tls: true)
            #expect(report.echoed == 14 && report.pong == true && report.received_code == 1000, "\(report)")
            // A backend certificate that does not verify: 502, and nothing is joined.
            let refused = try await Self.client("refused", port: gateway.port, path: "/stranger", tls: true)
            #expect(refused.status == 502)
        } catch {
            await gateway.shutdown()
            throw error
        }
        await gateway.shutdown()
    }

    /// A handshake request over a raw connection.
    static func handshake(
        _ port: Int, path: String, extra: [(String, String)] = [], method: String = "GET"
    ) throws -> RawHTTPClient.Response {
        let client = try RawHTTPClient(port: port, receiveTimeout: 90)
        let fields = [
            ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
        ]
        let names = Set(extra.map { $0.0.lowercased() })
        return try client.request(method, path, headers: fields.filter { !names.contains($0.0.lowercased()) } + extra)
    }

    @Test("a backend's 101 that does not complete the handshake is a 502; a refusal is relayed as it came; bad handshakes never reach it")
    func handshakeChecks() async throws {
        let backend = try await ScriptedBackend.start { request in
            switch request.target {
            case "/wrong-accept":
                return [
                    .text(
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n"
                    )
                ]
            case "/unoffered-extension":
                return [
                    .text(
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: x-secret\r\n\r\n")
                ]
            default:
                return [.text("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\nnot you\r\n")]
            }
        }
        let gateway = try await TestGateway.start(
            policy: """
                backends: { raw: { url: "http://127.0.0.1:\(backend.port)" } }
                services: { raw: { path: /raw, websocket: true, versions: { 1: { proxy: { backend: raw, rewrite: / } } } } }
                """)
        let port = gateway.port
        let (wrongAccept, unoffered, refused, version, post, badKey) = try await offThePool {
            (
                try Self.handshake(port, path: "/raw/wrong-accept"), try Self.handshake(port, path: "/raw/unoffered-extension"),
                try Self.handshake(port, path: "/raw/refuse"),
                try Self.handshake(port, path: "/raw/x", extra: [("Sec-WebSocket-Version", "8")]),
                try Self.handshake(port, path: "/raw/x", method: "POST"),
                try Self.handshake(port, path: "/raw/x", extra: [("Sec-WebSocket-Key", "short")])
            )
        }
        #expect(wrongAccept.status == 502)
        #expect(String(decoding: wrongAccept.body, as: UTF8.self).contains("Sec-WebSocket-Accept"))
        #expect(unoffered.status == 502)
        #expect(String(decoding: unoffered.body, as: UTF8.self).contains("x-secret"))
        #expect(refused.status == 403)
        #expect(String(decoding: refused.body, as: UTF8.self) == "not you\r\n")
        #expect(refused.header("connection")?.lowercased() == "close")
        #expect(version.status == 426)
        #expect(version.header("sec-websocket-version") == "13")
        #expect(post.status == 400)
        #expect(badKey.status == 400)
        #expect(backend.requestsReceived == 3)
        #expect(gateway.gateway.streams.count(service: "raw") == 0)
        await gateway.shutdown()
        try await backend.shutdown()
    }

    @Test(
        "the demo's live backend behind the shipped routes: its WebSocket echo (SwiftNIO's server) behind an API key, its ticks resumed after a Last-Event-ID",
        .enabled(if: installed))
    func demo() async throws {
        let live = try await LiveDemoBackend.start(port: 0, tickInterval: .milliseconds(50))
        let gateway = try await TestGateway.start(policy: Self.demoPolicy(livePort: live.port))
        do {
            let report = try await Self.client("echo", port: gateway.port, path: "/chat", headers: ["X-API-Key": Self.appKey])
            #expect(
                report.echoed == 14 && report.pong == true && report.whoami_raw == "whoami" && report.received_code == 1000, "\(report)")
            let curl = try ChildProcess(
                "/usr/bin/curl", ["-N", "-s", "--max-time", "60", "-H", "Last-Event-ID: 5", "http://127.0.0.1:\(gateway.port)/ticks"],
                standardOutput: .pipe)
            let ticks = try await offThePool {
                var text = ""
                EventStreamTests.read(curl.standardOutput!, until: "id: 7\n", into: &text)
                curl.signal(SIGTERM)
                _ = curl.wait()
                return text
            }
            #expect(ticks.hasPrefix("retry: 2000\n\nid: 6\ndata: {\"tick\":6,"), "\(ticks)")
            #expect(ticks.contains("\n\nid: 7\n"), "\(ticks)")
        } catch {
            await gateway.shutdown()
            throw error
        }
        await gateway.shutdown()
        try await live.shutdown()
    }

    /// The shipped policy's chat and ticks routes (policies/services.yaml), on the test's ports.
    static func demoPolicy(livePort: Int) -> String {
        """
        backends:
          live: { url: "http://127.0.0.1:\(livePort)", connectTimeout: 1s, timeout: 5s }
        services:
          chat:
            path: /chat
            auth: apiKey
            websocket: true
            limits: { maxUpgraded: 1000, streamIdleTimeout: 5m, streamMaxLifetime: 1h }
            versions: { 1: { proxy: { backend: live, rewrite: / } } }
          ticks:
            path: /ticks
            heartbeat: 15s
            limits: { streamIdleTimeout: 60s, streamMaxLifetime: 1h }
            versions: { 1: { proxy: { backend: live } } }
        tiers:
          standard: { rate: 10000/s, burst: 10000, maxUpgraded: 10 }
        keys:
          app-one: { secret: "\(SignedServicesFixture.appSecret)", demo: true, services: ["*"], tier: standard }
        """
    }

    @Test(
        "a handshake signed (RFC 9421) over its method, authority, path and key is accepted once; tampered or replayed, refused",
        .enabled(if: installed))
    func signed() async throws {
        try await Self.withGateway { gateway, _ in
            let signer = TestSigner(keyID: "app-one", secret: SignedServicesFixture.appSecret, authority: "127.0.0.1:\(gateway.port)")
            let key = "dGhlIHNhbXBsZSBub25jZQ=="
            let fields = try signer.headers(
                "GET", "/signed/room?x=1", headers: [("Sec-WebSocket-Key", key)],
                components: [.method, .authority, .path, .query, .field("sec-websocket-key")])
            // The Python client makes its own Sec-WebSocket-Key: sign the one it will send.
            var headers = Dictionary(fields.filter { $0.0 != "Sec-WebSocket-Key" }, uniquingKeysWith: { $1 })
            headers["X-Fixed-Key"] = key
            let accepted = try await Self.client("echo-fixed-key", port: gateway.port, path: "/signed/room?x=1", headers: headers)
            #expect(accepted.echoed == 1, "\(accepted)")
            let replayed = try await Self.client("refused", port: gateway.port, path: "/signed/room?x=1", headers: headers)
            #expect(replayed.status == 401)
            #expect(replayed.body?.contains("replay") == true, "\(replayed)")
            let fresh = try signer.headers(
                "GET", "/signed/room?x=1", headers: [("Sec-WebSocket-Key", key)],
                components: [.method, .authority, .path, .query, .field("sec-websocket-key")])
            var tampered = Dictionary(fresh.filter { $0.0 != "Sec-WebSocket-Key" }, uniquingKeysWith: { $1 })
            tampered["X-Fixed-Key"] = key
            let moved = try await Self.client("refused", port: gateway.port, path: "/signed/other?x=1", headers: tampered)
            #expect(moved.status == 401)
        }
    }

    /// The handshake's request as raw bytes, with the RFC's sample key.
    static func handshakeText(_ path: String, extra: String = "") -> String {
        "GET \(path) HTTP/1.1\r\nHost: gateway.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\(extra)\r\n"
    }

    @Test(
        "a backend that closes right after its 101, in the same segment, ends the stream: the client gets its close frame, nothing is held")
    func backendGoneAtOnce() async throws {
        var answer = ByteBuffer(
            string: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
        answer.writeBytes([0x88, 0x02, 0x03, 0xE8])
        let backend = try await ScriptedBackend.start { [answer] _ in [.send(answer), .close] }
        let gateway = try await TestGateway.start(
            policy: """
                backends: { raw: { url: "http://127.0.0.1:\(backend.port)" } }
                services: { raw: { path: /raw, websocket: true, versions: { 1: { proxy: { backend: raw } } } } }
                """)
        let port = gateway.port
        let outcomes = try await offThePool {
            try (0..<20).map { _ -> (Int, [UInt8]?, Bool) in
                let client = try RawHTTPClient(port: port, receiveTimeout: 90)
                try client.send(Self.handshakeText("/raw"))
                let head = try client.readResponse()
                return (head.status, try client.readExactly(4), client.waitForClose())
            }
        }
        for (status, frame, closed) in outcomes {
            #expect(status == 101)
            #expect(frame == [0x88, 0x02, 0x03, 0xE8])
            #expect(closed)
        }
        let released = await eventually { gateway.gateway.streams.count(service: "raw") == 0 }
        #expect(released)
        let after = try await offThePool { try gateway.connect().request("GET", "/raw/x").status }
        #expect(after == 101 || after == 400 || after == 502 || after == 200)
        await gateway.shutdown()
        try await backend.shutdown()
    }

    @Test("a frame the client sends right behind its handshake, before the 101, reaches the backend", .enabled(if: installed))
    func frameWithHandshake() async throws {
        try await Self.withGateway { gateway, _ in
            let port = gateway.port
            let (status, echoed) = try await offThePool {
                let client = try RawHTTPClient(port: port, receiveTimeout: 90)
                // A masked text frame "hi" (mask 0: the payload reads as it is), in the handshake's segment.
                let handshake = Self.handshakeText("/quiet", extra: "Sec-WebSocket-Protocol: chat.v1\r\n")
                try client.send(Array(handshake.utf8) + [0x81, 0x82, 0, 0, 0, 0] + Array("hi".utf8))
                let head = try client.readResponse()
                return (head.status, try client.readExactly(4))
            }
            #expect(status == 101)
            #expect(echoed == [0x81, 0x02] + Array("hi".utf8))
        }
    }
}
