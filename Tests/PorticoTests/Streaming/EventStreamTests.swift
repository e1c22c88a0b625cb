import Foundation
import NIOCore
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
        let gateway = try await TestGateway.start(
            policy: """
                compression: { algorithms: [gzip], minBytes: 1 }
                backends: { events: { url: "http://127.0.0.1:\(backend.port)", timeout: 30s } }
                services:
                  live: { path: /live, cache: { defaultTTL: 30s }, versions: { 1: { proxy: { backend: events } } } }
                """)
        let curl = try ChildProcess(
            "/usr/bin/curl",
            [
                "-N", "-s", "-i", "--max-time", "60", "-H", "Accept-Encoding: gzip", "-H", "Last-Event-ID: 41",
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
}
