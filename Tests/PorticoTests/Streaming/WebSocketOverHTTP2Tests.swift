import Foundation
import Logging
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

/// WebSocket over HTTP/2 (RFC 8441): a client speaking `h2` (PyPI) with `wsproto`'s frames opens
/// the stream with an extended CONNECT; the gateway opens the same WebSocket with the backend over
/// HTTP/1.1 (Python's `websockets` echo server, as in ``WebSocketTests``) and relays the frames.
@Suite("WebSocket over HTTP/2 through the gateway", .timeLimit(.minutes(4)))
struct WebSocketOverHTTP2Tests {
    static let script = Repository.root.appendingPathComponent("scripts/interop/websocket-h2-client.py").path
    static let installed = WebSocketTests.installed && Repository.interopPythonImports("h2") && Repository.interopPythonImports("wsproto")

    struct Report: Decodable {
        var enable_connect_protocol: Bool
        var status: Int
        var headers: [String: String]
        var body: String?
        var echoed: Int?
        var mismatch: [String: String]?
        var pong: Bool?
        var whoami: WebSocketTests.WhoAmI?
        var close: [CloseValue]?
        var stream_ended: Bool?
        var reset: Int?
    }

    /// A close frame's code or reason, as the JSON list holds them.
    enum CloseValue: Decodable, Equatable {
        case code(Int)
        case reason(String)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let code = try? container.decode(Int.self) {
                self = .code(code)
            } else {
                self = .reason(try container.decode(String.self))
            }
        }
    }

    static func client(_ mode: String, port: Int, path: String, headers: [String: String] = [:]) async throws -> Report {
        let fields = String(decoding: try JSONEncoder().encode(headers), as: UTF8.self)
        let result = try await offThePool {
            try ChildProcess.run(Repository.interopPython!, [script, mode, "127.0.0.1", "\(port)", path, fields])
        }
        try #require(result.termination == .exited(0), "\(String(decoding: result.errors, as: UTF8.self))")
        return try JSONDecoder().decode(Report.self, from: result.output)
    }

    /// The ``WebSocketTests`` gateway, on a listener that speaks HTTP/1.1 and h2c.
    static func withGateway(logger: Logger? = nil, _ body: (_ gateway: TestGateway) async throws -> Void) async throws {
        try await WebSocketTests.withGateway(logger: logger, listener: "protocols: [http/1.1, h2c]") { gateway, _ in try await body(gateway)
        }
    }

    @Test(
        "an extended CONNECT opens the WebSocket: messages of 0 B to 1 MiB, a ping and a close pass both ways, END_STREAM each way",
        .enabled(if: installed))
    func echo() async throws {
        let recorder = RecordingLogHandler()
        try await Self.withGateway(logger: Logger(label: "portico.test") { _ in recorder }) { gateway in
            let report = try await Self.client(
                "echo", port: gateway.port, path: "/chat/general", headers: ["X-API-Key": WebSocketTests.appKey])
            #expect(report.enable_connect_protocol, "the gateway offers extended CONNECT in its SETTINGS")
            #expect(report.status == 200, "\(report)")
            #expect(report.headers["sec-websocket-protocol"] == "chat.v1")
            #expect(report.headers["sec-websocket-accept"] == nil && report.headers["upgrade"] == nil)
            #expect(report.mismatch == nil)
            #expect(report.echoed == 14)
            #expect(report.pong == true)
            // The backend was asked over HTTP/1.1, at the rewritten path, without the key.
            #expect(report.whoami?.path == "/room/general")
            #expect(report.whoami?.headers["x-api-key"] == .some(nil))
            #expect(report.close == [.code(1000), .reason("done")])
            #expect(report.stream_ended == true && report.reset == nil, "\(report)")

            let logged = await eventually { recorder.records.contains { $0.metadata["stream_end"] != nil } }
            #expect(logged)
            let line = try #require(recorder.records.first { $0.metadata["stream_end"] != nil })
            #expect(line.metadata["status"]?.description == "200")
            #expect(line.metadata["protocol"]?.description == "HTTP/2")
            #expect(line.metadata["stream_end"]?.description == "client closed")
            let sent = Int(line.metadata["bytes_in"]?.description ?? "") ?? 0
            #expect(sent > 2 << 20, "both 1 MiB messages went up: \(line.metadata)")
            #expect(gateway.gateway.streams.count(service: "chat") == 0)
        }
    }

    @Test("a close from the backend reaches the client, and the gateway ends the stream after it", .enabled(if: installed))
    func backendCloses() async throws {
        try await Self.withGateway { gateway in
            let report = try await Self.client(
                "server-closes", port: gateway.port, path: "/chat", headers: ["X-API-Key": WebSocketTests.appKey])
            #expect(report.status == 200)
            #expect(report.close == [.code(1000), .reason("bye")])
            #expect(report.stream_ended == true && report.reset == nil, "\(report)")
        }
    }

    @Test(
        "an extended CONNECT is authenticated like any request; a service without websocket: true answers 501",
        .enabled(if: installed))
    func refusals() async throws {
        try await Self.withGateway { gateway in
            let anonymous = try await Self.client("refused", port: gateway.port, path: "/chat")
            #expect(anonymous.status == 401)
            #expect(anonymous.body?.contains("urn:portico:problem:") == true, "\(anonymous)")
            let plain = try await Self.client("refused", port: gateway.port, path: "/plain/x")
            #expect(plain.status == 501, "\(plain)")
            #expect(plain.body?.contains("tunnel-not-offered") == true, "\(plain)")
            #expect(plain.headers["content-type"] == "application/problem+json")
        }
    }

    @Test(
        "a backend that answers the handshake with a 200 instead of a 101 is a 502 over HTTP/2, never a tunnel",
        .enabled(if: installed))
    func backendWithoutWebSocket() async throws {
        let backend = try await BackendServer.start(handler: DemoBackends.echo)
        let gateway = try await TestGateway.start(
            policy: """
                backends:
                  echo: { url: "http://127.0.0.1:\(backend.port)" }
                services:
                  fake: { path: /fake, websocket: true, versions: { 1: { proxy: { backend: echo } } } }
                """, listener: "protocols: [http/1.1, h2c]")
        let report = try await Self.client("refused", port: gateway.port, path: "/fake/x")
        #expect(report.status == 502, "\(report)")
        #expect(report.body?.contains("instead of 101") == true, "\(report)")
        #expect(backend.requestsReceived == 1)
        await gateway.shutdown()
        try await backend.shutdown()
    }

    @Test(
        "headless Chromium opens a page's WebSocket on its HTTP/2 connection: the handshake is an extended CONNECT",
        .enabled(if: WebSocketTests.installed && ConsoleBrowser.available))
    func browser() async throws {
        let recorder = RecordingLogHandler()
        let server = try WebSocketTests.server()
        defer { server.stop() }
        try #require(server.port > 0)
        let gateway = try await TestGateway.start(
            policy: WebSocketTests.policy(backendPort: server.port), logger: Logger(label: "portico.test") { _ in recorder },
            tls: TestCertificates.listenerTLS())
        // The tests' CA is not the browser's: its certificate errors are ignored, nothing else is.
        let origin = "https://localhost:\(gateway.port)"
        let outcome = try await offThePool {
            let browser = try ConsoleBrowser(origin + "/nothing-here", flags: ["--ignore-certificate-errors"])
            defer { browser.close() }
            return try browser.evaluate(
                """
                new Promise((resolve) => {
                  const socket = new WebSocket("wss://localhost:\(gateway.port)/quiet/room", ["chat.v1"]);
                  socket.onopen = () => socket.send("hello from the browser");
                  socket.onmessage = (event) => { resolve(socket.protocol + " " + event.data); socket.close(1000); };
                  socket.onerror = () => resolve("error");
                  setTimeout(() => resolve("no answer"), 60000);
                })
                """)
        }
        #expect(outcome == "chat.v1 hello from the browser")
        let logged = await eventually { recorder.records.contains { $0.metadata["stream_end"] != nil } }
        #expect(logged)
        let line = recorder.records.first { $0.metadata["stream_end"] != nil }
        #expect(
            line?.metadata["method"]?.description == "CONNECT" && line?.metadata["protocol"]?.description == "HTTP/2",
            "\(String(describing: line?.metadata))")
        #expect(line?.metadata["status"]?.description == "200")
        await gateway.shutdown()
    }
}
