import Foundation
import Logging
import NIOCore
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

@testable import PorticoClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The façade's streams against the real gateway: server-sent events from the demo's live backend
/// read as an `AsyncSequence`, and a signed WebSocket opening request that a client no one here
/// wrote (Python's `websockets`) takes through the gateway to a `websockets` echo server.
@Suite("The client façade's streams against the gateway", .timeLimit(.minutes(4)))
struct StreamingClientTests {
    static let peer = Repository.root.appendingPathComponent("scripts/interop/websocket-peer.py").path
    static let peerInstalled = Repository.interopPythonImports("websockets")

    struct Tick: Decodable {
        var tick: Int
    }

    /// The waits a reconnection asks for, recorded instead of slept.
    final class Sleeps: Sendable {
        let taken = Mutex<[Duration]>([])
        var sleep: @Sendable (Duration) async throws -> Void { { [self] duration in taken.withLock { $0.append(duration) } } }
    }

    /// The façade's gateway with the live backend (a tick every 20 ms) behind `ticks`, and, when
    /// the `websockets` peer is installed, its echo server behind `chat`.
    static func run(
        tls: String? = nil, logger: Logger? = nil, _ body: (TestGateway, URL) async throws -> Void
    ) async throws {
        let live = try await LiveDemoBackend.start(port: 0, tickInterval: .milliseconds(20))
        let chat = peerInstalled ? try AnnouncedServer(Repository.interopPython!, [peer, "server"]) : nil
        defer { chat?.stop() }
        do {
            try await FacadeFixture.run(
                tls: tls, streams: FacadeFixture.StreamBackends(ticks: live.port, chat: chat?.port ?? 1), logger: logger
            ) { gateway, locator, _ in
                try await body(gateway, locator)
            }
        } catch {
            try? await live.shutdown()
            throw error
        }
        try await live.shutdown()
    }

    /// Reads `count` events, then leaves the loop.
    static func read(_ events: ServerSentEvents, count: Int) async throws -> [ServerSentEvent] {
        var read: [ServerSentEvent] = []
        for try await event in events {
            read.append(event)
            if read.count == count { break }
        }
        return read
    }

    @Test("events arrive as they are sent; a stream that ends is reconnected, signed anew, with Last-Event-ID, after its retry: time")
    func reconnects() async throws {
        try await Self.run { _, locator in
            let sleeps = Sleeps()
            let api = FacadeFixture.api(locator, sleep: sleeps.sleep)
            // The backend ends each connection after 3 events; the façade resumes after the last id.
            let events = try await Self.read(api.events("ticks", query: [URLQueryItem(name: "count", value: "3")]), count: 7)
            #expect(events.map(\.lastEventID) == ["1", "2", "3", "4", "5", "6", "7"])
            #expect(try events.map { try $0.decode(Tick.self).tick } == [1, 2, 3, 4, 5, 6, 7])
            #expect(events.allSatisfy { $0.type == "message" })
            // Two reconnections, each after the stream's own `retry: 2000`.
            #expect(sleeps.taken.withLock { $0 } == [.milliseconds(2000), .milliseconds(2000)])

            // A starting Last-Event-ID resumes after it.
            let resumed = try await Self.read(api.events("ticks", lastEventID: "40"), count: 2)
            #expect(resumed.map(\.lastEventID) == ["41", "42"])
        }
    }

    @Test("without reconnection the sequence ends with the stream")
    func endsWithTheStream() async throws {
        try await Self.run { _, locator in
            var options = PorticoAPI.EventStreamOptions()
            options.reconnects = false
            let api = FacadeFixture.api(locator)
            var read: [String] = []
            for try await event in api.events("ticks", query: [URLQueryItem(name: "count", value: "2")], options: options) {
                read.append(event.lastEventID)
            }
            #expect(read == ["1", "2"])
        }
    }

    @Test("a refused stream throws the gateway's problem before any event; an answer that is not a stream is .decoding")
    func refusals() async throws {
        try await Self.run { _, locator in
            let wrong = FacadeFixture.api(locator, secret: "not-the-secret-at-all-0123456789abcdef")
            let refused = await #expect(throws: PorticoAPIError.unauthorized) {
                _ = try await Self.read(wrong.events("ticks"), count: 1)
            }
            #expect(refused?.status == 401)
            #expect(refused?.problem?.type.hasPrefix("urn:portico:problem:") == true)

            let api = FacadeFixture.api(locator)
            let notStream = await #expect(throws: PorticoAPIError.decoding) {
                _ = try await Self.read(api.events("echo", path: "/x"), count: 1)
            }
            #expect(notStream?.status == 200)
            #expect(notStream?.underlying as? EventStreamError == .notEventStream, "\(String(describing: notStream))")
        }
    }

    @Test("leaving the loop closes the connection: the gateway logs the stream's end")
    func leavingCloses() async throws {
        let recorder = RecordingLogHandler()
        try await Self.run(logger: Logger(label: "portico.test") { _ in recorder }) { _, locator in
            let api = FacadeFixture.api(locator)
            let events = try await Self.read(api.events("ticks"), count: 2)
            #expect(events.count == 2)
            let ended = await eventually {
                recorder.records.contains { $0.metadata["service"] == "ticks" && $0.metadata["stream_end"] != nil }
            }
            #expect(ended, "\(recorder.records.map(\.metadata))")
        }
    }

    @Test("over TLS with a private CA as the trust (libcurl on Linux): the same events, and leaving the loop closes")
    func privateAuthority() async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        try await Self.run(tls: try await DevelopmentCertificates.listenerTLS(), logger: logger) { _, locator in
            #expect(locator.scheme == "https")
            let trust = try ServerTrust(certificateAuthoritiesPEM: try DevelopmentCertificates.text("ca.pem"))
            let sleeps = Sleeps()
            let api = FacadeFixture.api(locator, trust: trust, sleep: sleeps.sleep)
            let events = try await Self.read(api.events("ticks", query: [URLQueryItem(name: "count", value: "2")]), count: 3)
            #expect(events.map(\.lastEventID) == ["1", "2", "3"])
            #expect(sleeps.taken.withLock { $0 } == [.milliseconds(2000)])
            // A stream that does not end by itself ends at the gateway when the reader leaves.
            let endless = try await Self.read(api.events("ticks"), count: 2)
            #expect(endless.count == 2)
            let ended = await eventually {
                recorder.records.contains { $0.metadata["service"] == "ticks" && $0.metadata["stream_end"] == "client closed" }
            }
            #expect(ended, "\(recorder.records.map(\.metadata))")
            // Without the trust, nothing: the first connection's failure is thrown at once.
            let untrusting = FacadeFixture.api(locator)
            await #expect(throws: PorticoAPIError.transport) { _ = try await Self.read(untrusting.events("ticks"), count: 1) }
        }
    }

    /// The signed request's fields for the Python client, which sends its own subprotocol offer.
    static func fields(of request: URLRequest) -> [String: String] {
        (request.allHTTPHeaderFields ?? [:]).filter { $0.key.lowercased() != "sec-websocket-protocol" }
    }

    static func client(_ mode: String, _ request: URLRequest) async throws -> [String: Any] {
        let fields = String(decoding: try JSONEncoder().encode(fields(of: request)), as: UTF8.self)
        let url = request.url!.absoluteString
        let result = try await offThePool { try ChildProcess.run(Repository.interopPython!, [peer, "client", mode, url, fields]) }
        try #require(result.termination == .exited(0), "\(String(decoding: result.errors, as: UTF8.self))")
        return try #require(try JSONSerialization.jsonObject(with: result.output) as? [String: Any])
    }

    @Test(
        "a signed WebSocket request opens through the gateway once; replayed or for another path it is refused",
        .enabled(if: peerInstalled))
    func signedWebSocket() async throws {
        try await Self.run { _, locator in
            let api = FacadeFixture.api(locator)
            let request = try await api.webSocketRequest("chat", path: "/general", protocols: ["chat.v1"])
            #expect(request.url?.scheme == "ws")
            let covered = try #require(request.value(forHTTPHeaderField: "Signature-Input"))
            for component in ["\"@method\"", "\"@authority\"", "\"@path\"", "\"x-client-version\"", "\"sec-websocket-protocol\""] {
                #expect(covered.contains(component), "\(component) in \(covered)")
            }
            let opened = try await Self.client("whoami", request)
            #expect(opened["subprotocol"] as? String == "chat.v1", "\(opened)")
            #expect((opened["whoami"] as? [String: Any])?["path"] as? String == "/room/general", "\(opened)")

            // The nonce makes it good for one handshake.
            let replayed = try await Self.client("refused", request)
            #expect(replayed["status"] as? Int == 401, "\(replayed)")
            #expect((replayed["body"] as? String)?.contains("replay") == true, "\(replayed)")

            var moved = try await api.webSocketRequest("chat", path: "/general", protocols: ["chat.v1"])
            moved.url = URL(string: moved.url!.absoluteString.replacingOccurrences(of: "/general", with: "/other"))
            let refused = try await Self.client("refused", moved)
            #expect(refused["status"] as? Int == 401, "\(refused)")
        }
    }

    @Test("a WebSocket task: where URLSession cannot open one, .unsupported says why; where it can, it echoes through the gateway")
    func webSocketTask() async throws {
        try await Self.run { _, locator in
            let api = FacadeFixture.api(locator)
            guard PorticoAPI.urlSessionOpensWebSockets else {
                let error = await #expect(throws: PorticoAPIError.unsupported) {
                    _ = try await api.webSocketTask("chat", path: "/general")
                }
                #expect("\(error.map { "\($0)" } ?? "")".contains("webSocketRequest"))
                return
            }
            // This machine's URLSession can open one: through the gateway to the echo server.
            guard Self.peerInstalled else { return }
            let task = try await api.webSocketTask("chat", path: "/general", protocols: ["chat.v1"])
            task.resume()
            try await task.send(.string("hello through the gateway"))
            let answer = try await task.receive()
            guard case .string(let text) = answer else {
                Issue.record("not a text message: \(answer)")
                return
            }
            #expect(text == "hello through the gateway")
            task.cancel(with: .normalClosure, reason: nil)
        }
        // A trust that sends through libcurl on Linux has no session for a WebSocket task.
        #if os(Linux)
        let pinned = FacadeFixture.api(
            URL(string: "https://localhost:1/serviceLocator.json")!,
            trust: try ServerTrust(certificateAuthoritiesPEM: try DevelopmentCertificates.text("ca.pem")))
        await #expect(throws: PorticoAPIError.unsupported) { _ = try await pinned.webSocketTask("chat") }
        #endif
    }
}
