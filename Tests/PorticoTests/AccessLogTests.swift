import Logging
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@Suite("The access log")
struct AccessLogTests {
    @Test("one line per request names the request, its route, its outcome and its timings, and no header values")
    func accessLine() async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        let backend = try await BackendServer.start(handler: DemoBackends.echo)
        let gateway = try await TestGateway.start(
            policy: """
                backends:
                  echo: { url: "http://127.0.0.1:\(backend.port)" }
                services:
                  echo:
                    path: /echo
                    versions:
                      3: { proxy: { backend: echo } }
                """, logger: logger)
        let client = try gateway.connect()
        let ok = try client.request(
            "POST", "/echo/a?token=query-secret", headers: [("X-Request-Id", "trace-1"), ("Authorization", "Bearer header-secret")],
            body: "hi")
        #expect(ok.status == 200)
        #expect(try client.request("GET", "/echo/again").status == 200)
        #expect(try client.request("GET", "/missing").status == 404)
        await gateway.shutdown()
        try await backend.shutdown()

        let lines = recorder.records.filter { $0.message == "access" }
        #expect(lines.count == 3)
        let first = try #require(lines.first).metadata
        #expect(first["request_id"]?.description == "trace-1")
        #expect(first["method"]?.description == "POST")
        #expect(first["path"]?.description == "/echo/a")
        #expect(first["service"]?.description == "echo")
        #expect(first["version"]?.description == "3")
        #expect(first["backend"]?.description == "echo")
        #expect(first["status"]?.description == "200")
        #expect(first["bytes"]?.description == String(ok.body.count))
        #expect(first["client"]?.description == "127.0.0.1")
        #expect(first["upstream_ms"] != nil)
        #expect(first["upstream_connects"]?.description == "1")  // the first request opens the connection
        #expect(first["total_ms"] != nil)
        #expect(lines[1].metadata["upstream_connects"]?.description == "0")  // the pooled connection is reused
        let last = try #require(lines.last).metadata
        #expect(last["status"]?.description == "404")
        #expect(last["service"] == nil)
        let everything = recorder.records.map { "\($0.message) \($0.metadata)" }.joined()
        #expect(!everything.contains("query-secret"))
        #expect(!everything.contains("header-secret"))
    }
}
