import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOPosix
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

@testable import Portico

/// Server-sent events through the gateway, read by curl as a browser's EventSource would read them.
@Suite("Server-sent events through the gateway")
struct EventStreamTests {
    /// One chunk of a chunked body.
    static func chunk(_ text: String) -> String {
        String(text.utf8.count, radix: 16) + "\r\n" + text + "\r\n"
    }

    /// What `output` gives until it holds `marker` or ends (curl's `--max-time` bounds the wait).
    static func read(_ output: FileHandle, until marker: String?, into text: inout String) {
        while marker.map({ !text.contains($0) }) ?? true {
            let chunk = output.availableData
            if chunk.isEmpty { return }
            text += String(decoding: chunk, as: UTF8.self)
        }
    }

    @Test("an event stream reaches the client event by event, uncompressed and never stored, with the client's Last-Event-ID")
    func streams() async throws {
        let release = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        let released = Atomic<Bool>(false)
        defer { if !released.exchange(true, ordering: .relaxed) { release.succeed() } }
        let lastEventIDs = Mutex<[String]>([])
        let backend = try await ScriptedBackend.start { request in
            lastEventIDs.withLock { $0.append(request.field("last-event-id") ?? "none") }
            return [
                .text(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + Self.chunk("id: 42\ndata: one\n\n")),
                .after(release.futureResult),
                .text(Self.chunk("data: two\n\n") + "0\r\n\r\n"),
            ]
        }
        // The test releases the second event from a task, which a loaded machine may run late:
        // the wait between events must outlast that.
        let gateway = try await TestGateway.start(
            policy: """
                compression: { algorithms: [gzip], minBytes: 1 }
                backends: { events: { url: "http://127.0.0.1:\(backend.port)", timeout: 120s } }
                services:
                  live: { path: /live, cache: { defaultTTL: 30s }, versions: { 1: { proxy: { backend: events } } } }
                """)
        let curl = try ChildProcess(
            "/usr/bin/curl",
            [
                "-N", "-s", "-i", "--max-time", "180", "-H", "Accept-Encoding: gzip", "-H", "Last-Event-ID: 41",
                "http://127.0.0.1:\(gateway.port)/live/x",
            ], standardOutput: .pipe)
        let output = curl.standardOutput!
        // The first event arrives while the backend still holds the stream open.
        let first = try await offThePool {
            var text = ""
            Self.read(output, until: "data: one", into: &text)
            return text
        }
        #expect(first.contains("id: 42\ndata: one") && !first.contains("data: two"), "\(first)")
        let head = first.lowercased()
        #expect(head.hasPrefix("http/1.1 200") && head.contains("content-type: text/event-stream"))
        #expect(!head.contains("content-encoding") && !head.contains("content-length"), "\(first)")
        if !released.exchange(true, ordering: .relaxed) { release.succeed() }
        let rest = try await offThePool {
            var text = ""
            Self.read(output, until: nil, into: &text)
            return text
        }
        #expect(rest.contains("data: two"), "\(rest)")
        let ended = try await offThePool { curl.wait() }
        #expect(ended == .exited(0))

        // Not stored: the next request reaches the backend, without a Last-Event-ID of its own.
        let again = try gateway.connect().request("GET", "/live/x")
        #expect(again.status == 200 && again.bodyText.contains("data: two"))
        #expect(backend.requestsReceived == 2)
        #expect(lastEventIDs.withLock { $0 } == ["41", "none"])
        await gateway.shutdown()
        try await backend.shutdown()
    }

    /// A backend whose answer is an event stream of `events`, sent `gap` apart, then its end; or,
    /// with `hold`, the first event and then nothing until `hold` completes.
    static func eventBackend(events: [String], gap: TimeAmount, hold: EventLoopFuture<Void>? = nil) async throws -> ScriptedBackend {
        try await ScriptedBackend.start { _ in
            var steps: [ScriptedBackend.Step] = [
                .text("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            ]
            for (index, event) in events.enumerated() {
                if index > 0 { steps.append(hold.map { .after($0) } ?? .pause(gap)) }
                steps.append(.text(Self.chunk(event)))
            }
            steps.append(.text("0\r\n\r\n"))
            return steps
        }
    }

    /// curl reading an event stream to its end; its exit status and everything it printed.
    static func curl(_ url: String, caFile: String? = nil) async throws -> (ChildProcess.Termination, String) {
        let result = try await offThePool {
            try ChildProcess.run(
                "/usr/bin/curl",
                ["-N", "-s", "--max-time", "120", "-H", "Accept: text/event-stream"] + (caFile.map { ["--cacert", $0] } ?? []) + [url])
        }
        return (result.termination, String(decoding: result.output, as: UTF8.self))
    }

    @Test(
        "streamIdleTimeout, not the backend's timeout, bounds the waits between events: over NIO, and over libcurl to an https backend",
        .timeLimit(.minutes(2)))
    func idleTimeoutReplacesTimeout() async throws {
        // Two events 7 s apart, a backend timeout of 5 s (the head comes at once: 5 s leaves a loaded
        // machine room for it): only the service's 60 s idle bound lets the second through.
        let backend = try await Self.eventBackend(events: ["data: one\n\n", "data: two\n\n"], gap: .seconds(7))
        // Another gateway, over TLS, stands in for an https backend (the libcurl client's path).
        let tlsBackend = try await TestGateway.start(
            policy: """
                backends: { events: { url: "http://127.0.0.1:\(backend.port)", timeout: 30s } }
                services: { live: { path: /live, versions: { 1: { proxy: { backend: events, rewrite: / } } } } }
                """, tls: TestCertificates.listenerTLS())
        let gateway = try await TestGateway.start(
            policy: """
                backends:
                  plain: { url: "http://127.0.0.1:\(backend.port)", timeout: 5s }
                  secure: { url: "https://localhost:\(tlsBackend.port)", caFile: "\(TestCertificates.path("ca.pem"))", timeout: 5s }
                services:
                  plain: { path: /plain, limits: { streamIdleTimeout: 60s }, versions: { 1: { proxy: { backend: plain, rewrite: / } } } }
                  secure: { path: /secure, limits: { streamIdleTimeout: 60s }, versions: { 1: { proxy: { backend: secure, rewrite: /live } } } }
                  bounded: { path: /bounded, versions: { 1: { proxy: { backend: plain, rewrite: / } } } }
                """)
        let base = "http://127.0.0.1:\(gateway.port)"
        async let plain = Self.curl(base + "/plain/x")
        async let secure = Self.curl(base + "/secure/x")
        async let bounded = Self.curl(base + "/bounded/x")
        let results = try await [("/plain", plain), ("/secure", secure)]
        for (path, (ended, text)) in results {
            #expect(ended == .exited(0), "\(path): \(text)")
            #expect(text == "data: one\n\ndata: two\n\n", "\(path)")
        }
        let (cut, partial) = try await bounded
        // Without the service's bound, the backend's 5 s is the longest wait: cut after the first event.
        #expect(cut != .exited(0))
        #expect(partial == "data: one\n\n")
        await gateway.shutdown()
        await tlsBackend.shutdown()
        try await backend.shutdown()
    }

    @Test(
        "a quiet stream gets heartbeat comments between events; past streamIdleTimeout it is cut, past streamMaxLifetime it ends; each is logged"
    )
    func heartbeatIdleAndLifetime() async throws {
        let release = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        defer { release.succeed() }
        let backend = try await Self.eventBackend(events: ["data: one\n\n", "data: two\n\n"], gap: .zero, hold: release.futureResult)
        let recorder = RecordingLogHandler()
        let gateway = try await TestGateway.start(
            policy: """
                backends: { events: { url: "http://127.0.0.1:\(backend.port)", timeout: 60s } }
                services:
                  beating: { path: /beating, heartbeat: 200ms, limits: { streamMaxLifetime: 3s }, versions: { 1: { proxy: { backend: events } } } }
                  idle: { path: /idle, limits: { streamIdleTimeout: 2s }, versions: { 1: { proxy: { backend: events } } } }
                """, logger: Logger(label: "portico.test") { _ in recorder })
        let (lifetime, beats) = try await Self.curl("http://127.0.0.1:\(gateway.port)/beating/x")
        // A clean end (the last chunk), so an EventSource reconnects.
        #expect(lifetime == .exited(0))
        #expect(beats.contains(": keep-alive\n\n"), "\(beats)")
        #expect(beats.replacingOccurrences(of: ": keep-alive\n\n", with: "") == "data: one\n\n", "\(beats)")
        let (idle, text) = try await Self.curl("http://127.0.0.1:\(gateway.port)/idle/x")
        #expect(idle != .exited(0))
        #expect(text == "data: one\n\n")
        let logged = await eventually { recorder.records.filter { $0.metadata["stream_end"] != nil }.count == 2 }
        #expect(logged)
        let endings = recorder.records.compactMap { record in
            record.metadata["stream_end"].map { "\(record.metadata["service"] ?? "?"): \($0)" }
        }
        #expect(Set(endings) == ["beating: lifetime reached", "idle: idle timeout"], "\(endings)")
        await gateway.shutdown()
        try await backend.shutdown()
    }

    @Test("the keeper writes a heartbeat only between events, a whole interval after the last bytes")
    func keeperBoundaries() {
        let loop = EmbeddedEventLoop()
        let written = NIOLoopBoundBox<[String]>([], eventLoop: loop)
        let expired = NIOLoopBoundBox(false, eventLoop: loop)
        let keeper = EventStreamKeeper(
            eventLoop: loop, heartbeat: .seconds(10), maxLifetime: .seconds(60),
            actions: .init(write: { written.value.append(String(buffer: $0)) }, expire: { expired.value = true }))
        keeper.written(ByteBuffer(string: "data: one\n\n"))
        loop.advanceTime(by: .seconds(9))
        #expect(written.value.isEmpty)
        loop.advanceTime(by: .seconds(1))
        #expect(written.value == [EventStreamKeeper.heartbeatComment])
        // Half an event: no comment may go inside it.
        keeper.written(ByteBuffer(string: "data: two\n"))
        loop.advanceTime(by: .seconds(25))
        #expect(written.value.count == 1)
        keeper.written(ByteBuffer(string: "\r\n"))
        #expect(!keeper.atEventBoundary)
        keeper.written(ByteBuffer(string: "data: three\r\n\r\n"))
        #expect(keeper.atEventBoundary)
        loop.advanceTime(by: .seconds(10))
        #expect(written.value.count == 2)
        loop.advanceTime(by: .seconds(20))
        #expect(expired.value)
        let beats = written.value.count
        loop.advanceTime(by: .seconds(60))
        #expect(written.value.count == beats)
    }
}
