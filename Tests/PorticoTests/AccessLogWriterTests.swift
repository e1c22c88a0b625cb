import Foundation
import Logging
import NIOCore
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

#if canImport(Glibc)
import Glibc
#endif

/// A file the writer appends to, read back by the test.
private struct LogFile {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("portico-access-\(UUID().uuidString).log").path
    let fd: Int32

    init() { fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600) }

    var lines: [String] { ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }

    func remove() {
        close(fd)
        unlink(path)
    }
}

@Suite("The access log's batched writer")
struct AccessLogWriterTests {
    @Test("a real gateway's lines, as JSON: one per exchange, the fields of the record, no header value or secret")
    func jsonLines() async throws {
        let file = LogFile()
        defer { file.remove() }
        let writer = AccessLogWriter(format: .json, output: file.fd)
        let backend = try await BackendServer.start(handler: DemoBackends.echo)
        let snapshot = try TestGateway.snapshot(policy: echoServicePolicy([backend.port]), accessLog: true)
        let gateway = Gateway(snapshot: snapshot, accessLogWriter: writer)
        try await gateway.start()
        let client = try RawHTTPClient(port: gateway.boundPorts["test"]!)
        let ok = try client.request(
            "POST", "/echo/a?token=query-secret", headers: [("X-Request-Id", "trace-1"), ("Authorization", "Bearer header-secret")],
            body: "hi")
        #expect(ok.status == 200)
        #expect(try client.request("GET", "/missing").status == 404)
        writer.flush()
        let lines = file.lines
        await gateway.shutdown()
        try await backend.shutdown()

        #expect(lines.count == 2)
        let records = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(records.count == 2)
        let first = try #require(records.first)
        #expect(first["request_id"] as? String == "trace-1")
        #expect(first["method"] as? String == "POST")
        #expect(first["path"] as? String == "/echo/a")
        #expect(first["service"] as? String == "echo")
        #expect(first["version"] as? Int == 1)
        #expect(first["backend"] as? String == "echo")
        #expect(first["status"] as? Int == 200)
        #expect(first["bytes"] as? Int == ok.body.count)
        #expect(first["client"] as? String == "127.0.0.1")
        #expect(first["upstream_ms"] is Double || first["upstream_ms"] is Int)
        #expect((first["time"] as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
        let last = try #require(records.last)
        #expect(last["status"] as? Int == 404)
        #expect(last["service"] == nil)
        let everything = lines.joined()
        #expect(!everything.contains("query-secret"))
        #expect(!everything.contains("header-secret"))
        writer.shutdown()
    }

    @Test("logfmt: key=value pairs, values quoted and escaped when they need it")
    func logfmt() throws {
        var record = AccessRecord(
            requestID: "id-1", method: "GET", path: "/a b\"c", client: "::1", started: .now() - .milliseconds(2))
        record.status = 503
        record.failure = "backend said \"no\"\nthen closed"
        var bytes: [UInt8] = []
        AccessLogLine(format: .logfmt).append(
            record, now: record.started + .microseconds(1500), wallClockNanos: 1_764_000_000_123_000_000, to: &bytes)
        let line = String(decoding: bytes, as: UTF8.self)
        #expect(
            line
                == #"time=2025-11-24T16:00:00.123Z request_id=id-1 method=GET path="/a b\"c" protocol=HTTP/1.1 status=503 bytes=0 total_ms=1.500 client=::1 failure="backend said \"no\"\u000athen closed""#
                + "\n")
    }

    @Test("JSON: control characters and quotes are escaped, durations are numbers with microseconds")
    func jsonEscaping() throws {
        var record = AccessRecord(requestID: "r", method: "GET", path: "/\u{1}\\", client: nil, started: .uptimeNanoseconds(0))
        record.upstreamDuration = .nanoseconds(12_345_678)
        record.status = 200
        var bytes: [UInt8] = []
        AccessLogLine(format: .json).append(record, now: .uptimeNanoseconds(1_000_000_000), wallClockNanos: 0, to: &bytes)
        let line = String(decoding: bytes, as: UTF8.self)
        #expect(
            line
                == #"{"time":"1970-01-01T00:00:00.000Z","request_id":"r","method":"GET","path":"/\u0001\\","protocol":"HTTP/1.1","status":200,"bytes":0,"total_ms":1000.000,"upstream_ms":12.345}"#
                + "\n")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        #expect(parsed["path"] as? String == "/\u{1}\\")
    }

    @Test("lines are written once a batch is full, at a flush, and the rest at shutdown")
    func batchesAndShutdown() async throws {
        let file = LogFile()
        defer { file.remove() }
        // A long interval: only the batch size or the shutdown can write these lines.
        let writer = AccessLogWriter(format: .json, output: file.fd, batchBytes: 1000, flushInterval: .seconds(3600))
        let line = Array(repeating: UInt8(ascii: "x"), count: 99) + [UInt8(ascii: "\n")]
        for _ in 0..<10 { writer.append(line) }
        #expect(await eventually { file.lines.count == 10 })
        for _ in 0..<3 { writer.append(line) }
        #expect(file.lines.count == 10)
        // A flush writes what waits without waiting for the interval.
        writer.flush()
        #expect(file.lines.count == 13)
        for _ in 0..<2 { writer.append(line) }
        writer.shutdown()
        #expect(file.lines.count == 15)
        // After shutdown, lines are dropped and counted, never written.
        writer.append(line)
        #expect(writer.droppedLines == 1)
        #expect(file.lines.count == 15)
    }

    @Test("a full buffer drops lines and counts them rather than blocking the event loop")
    func dropsWhenFull() throws {
        signal(SIGPIPE, SIG_IGN)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        // Nobody reads the pipe: once its 64 KiB are full the writer thread blocks in write(2).
        let writer = AccessLogWriter(format: .json, output: fds[1], batchBytes: 1024, maxBufferedBytes: 4096)
        let line = Array(repeating: UInt8(ascii: "x"), count: 1023) + [UInt8(ascii: "\n")]
        for _ in 0..<200 { writer.append(line) }
        #expect(writer.droppedLines > 0)
        // Closing the reading end fails the blocked write (EPIPE), so the writer can stop.
        close(fds[0])
        writer.shutdown()
        close(fds[1])
    }

    @Test("shutting down does not wait for ever on an output nobody reads; lines queued meanwhile are counted as dropped")
    func shutdownGivesUpOnABlockedOutput() throws {
        signal(SIGPIPE, SIG_IGN)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let writer = AccessLogWriter(format: .json, output: fds[1], batchBytes: 1024, maxBufferedBytes: 1024 * 1024)
        let line = Array(repeating: UInt8(ascii: "x"), count: 1023) + [UInt8(ascii: "\n")]
        // More than the pipe holds: the writer thread ends up blocked in write(2), and can never finish.
        for _ in 0..<200 { writer.append(line) }
        #expect(writer.shutdown(timeout: .milliseconds(200)) == false)
        let dropped = writer.droppedLines
        writer.append(line)
        #expect(writer.droppedLines == dropped + 1)
        // Let the blocked write fail so that the thread ends before the descriptors go.
        close(fds[0])
        #expect(writer.shutdown(timeout: .seconds(60)))
        close(fds[1])
    }
}
