import Foundation
import Logging
import NIOCore
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import PorticoUpstream
import Synchronization
import Testing

/// A code handler's fetches: only origin-form targets on the version's backends, and cancelled
/// with the request.
@Suite("Code handler fetches")
struct CodeHandlerFetchTests {
    /// Fetches `target` from `backend` and answers 200 with what came back; passes a failure on.
    struct Fetching: CodeHandler {
        var backend = "quotes"
        let target: String
        func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse> {
            context.fetch(backend: backend, target: target).map { fetched in
                CodeHandlerResponse(status: 200, contentType: "text/plain", body: fetched.body)
            }
        }
    }

    /// Fetches `/a`; when that fails, fetches `/b` (a handler's own fallback).
    struct FallingBack: CodeHandler {
        func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse> {
            context.fetch(backend: "quotes", target: "/a").flatMapError { _ in
                context.fetch(backend: "spare", target: "/b")
            }.map { CodeHandlerResponse(status: 200, body: $0.body) }
        }
    }

    /// Fetches an oversized body, takes that failure as its cue, and fails with an upstream error of
    /// its own making: the handler's error (500), not the backend's.
    struct OwnErrorAfterOversized: CodeHandler {
        func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse> {
            context.fetch(backend: "quotes", target: "/big").flatMapThrowing { _ in
                CodeHandlerResponse(status: 200, body: Data())
            }.flatMapErrorThrowing { _ in
                throw UpstreamError(.badResponse, detail: "made up by the handler")
            }
        }
    }

    /// Answers at once, with a content type of its own making.
    struct Typed: CodeHandler {
        let contentType: String
        func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse> {
            context.eventLoop.makeSucceededFuture(CodeHandlerResponse(status: 200, contentType: contentType, body: Data("typed".utf8)))
        }
    }

    static func start(
        handlers: [String: any CodeHandler], quotes: Int, spare: Int, spareTimeout: String = "120s", limits: String = "",
        logger: Logger? = nil
    ) async throws -> (Gateway, Int) {
        let versions = handlers.keys.sorted().enumerated().map {
            "      \($0.offset + 1): { code: { name: \($0.element), backends: [quotes, spare] } }"
        }
        let snapshot = try TestGateway.snapshot(
            policy: limits + """
                backends:
                  quotes: { url: "http://127.0.0.1:\(quotes)", connectTimeout: 5s, timeout: 120s }
                  spare: { url: "http://127.0.0.1:\(spare)", timeout: \(spareTimeout), rateLimit: { rate: 1/h, burst: 1 } }
                services:
                  probe:
                    path: /probe
                    versions:
                \(versions.joined(separator: "\n"))
                """)
        var quiet = Logger(label: "portico.test")
        quiet.logLevel = .critical
        let gateway = Gateway(snapshot: snapshot, logger: logger ?? quiet, codeHandlers: handlers)
        try await gateway.start()
        return (gateway, gateway.boundPorts["test"]!)
    }

    static let targets = [
        "@127.0.0.1:{other}/x", "//127.0.0.1:{other}/x", "http://127.0.0.1:{other}/x", "https://127.0.0.1:{other}/x",
        "x", "", "/x y", "/x\r\nHost: 127.0.0.1:{other}", "/x#f", "/x\\..\\y", "/%zz", "/%4", "/caf\u{E9}", "?q=1",
        // Dot segments, which a backend resolving them would climb out of its base path by.
        "/..", "/../x", "/./x", "/x/..", "/x/.", "/x/../../y", "/x/..?q=1", "/%2e%2e/x", "/%2E%2E/x", "/.%2e/x",
        "/%2e./x", "/x/%2E", "/x/..%2F..%2Fadmin", "/x/%2e%2e%5cadmin", "/x/..;/admin", "/x/.%2E;v=1/admin", "/x%00",
    ]

    @Test("a target that is not an origin-form path is refused as the handler's error; no backend sees a request")
    func targetsRefused() async throws {
        let quotes = try await BackendServer.start(handler: DemoBackends.echo)
        let other = try await BackendServer.start(handler: DemoBackends.echo)
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        var handlers: [String: any CodeHandler] = [:]
        let targets = Self.targets.map { $0.replacingOccurrences(of: "{other}", with: "\(other.port)") }
        for (index, target) in targets.enumerated() { handlers["t\(String(format: "%02d", index))"] = Fetching(target: target) }
        // Dots that make no dot segment, and any in the query, are fine.
        handlers["valid"] = Fetching(target: "/v2/quotes/.AAPL./...;v=1/a%2Fb?x=%41&y=a:b@c/d&z=/../%2e%2e")
        let (gateway, port) = try await Self.start(handlers: handlers, quotes: quotes.port, spare: other.port, logger: logger)
        let client = try RawHTTPClient(port: port, receiveTimeout: 10)
        for (index, target) in targets.enumerated() {
            let response = try client.request("GET", "/probe?apiVersion=\(index + 1)")
            #expect(response.status == 500, "\(target.debugDescription): \(response.bodyText)")
            #expect(response.header("Content-Type") == "application/problem+json", "\(target.debugDescription)")
        }
        #expect(quotes.requestsReceived == 0)
        #expect(other.requestsReceived == 0)
        // A proper target is fetched, from the version's backend.
        let valid = try client.request("GET", "/probe?apiVersion=\(targets.count + 1)")
        #expect(valid.status == 200, "\(valid.bodyText)")
        #expect(quotes.requestsReceived == 1)
        #expect(other.requestsReceived == 0)
        await gateway.shutdown()
        try await quotes.shutdown()
        try await other.shutdown()
        let logged = recorder.records.filter { $0.message == "code handler failed" }
        #expect(logged.count == targets.count)
        #expect(logged.allSatisfy { $0.metadata["error"]?.description.contains("single '/'") == true })
    }

    @Test("a content type with a line break or a control byte is the handler's error (500): no field of its making reaches the client")
    func contentTypeChecked() async throws {
        let quotes = try await BackendServer.start(handler: DemoBackends.echo)
        let recorder = RecordingLogHandler()
        let handlers: [String: any CodeHandler] = [
            "a": Typed(contentType: "text/plain\r\nSet-Cookie: session=handler"), "b": Typed(contentType: "text/plain\u{0}"),
            "c": Typed(contentType: "text/plain; charset=utf-8"),
        ]
        let (gateway, port) = try await Self.start(
            handlers: handlers, quotes: quotes.port, spare: quotes.port, logger: Logger(label: "portico.test") { _ in recorder })
        let answers = try await offThePool {
            let client = try RawHTTPClient(port: port, receiveTimeout: 60)
            return try (1...3).map { try client.request("GET", "/probe?apiVersion=\($0)") }
        }
        for refused in answers.prefix(2) {
            #expect(refused.status == 500, "\(refused.bodyText)")
            #expect(refused.header("Content-Type") == "application/problem+json")
            #expect(refused.header("Set-Cookie") == nil)
        }
        #expect(answers[2].status == 200)
        #expect(answers[2].header("Content-Type") == "text/plain; charset=utf-8")
        #expect(answers[2].bodyText == "typed")
        await gateway.shutdown()
        try await quotes.shutdown()
        let logged = recorder.records.filter { $0.message == "code handler failed" }
        #expect(logged.count == 2)
        #expect(logged.allSatisfy { $0.metadata["error"]?.description.contains("content type") == true })
    }

    @Test("a backend's limit refusing a code handler's fetch is the client's 429 with Retry-After, as a facade answers it")
    func fetchRefusedByLimit() async throws {
        let quotes = try await BackendServer.start(handler: DemoBackends.echo)
        let spare = try await BackendServer.start(handler: DemoBackends.echo)
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        let (gateway, port) = try await Self.start(
            handlers: ["limited": Fetching(backend: "spare", target: "/x")], quotes: quotes.port, spare: spare.port, logger: logger)
        let client = try RawHTTPClient(port: port, receiveTimeout: 10)
        let first = try client.request("GET", "/probe?apiVersion=1")
        #expect(first.status == 200, "\(first.bodyText)")
        // `spare` admits one fetch an hour: the second is refused before it is sent.
        let second = try client.request("GET", "/probe?apiVersion=1")
        #expect(second.status == 429, "\(second.bodyText)")
        #expect(second.header("Content-Type") == "application/problem+json")
        #expect(second.json?["type"] as? String == "urn:portico:problem:rate-limited")
        #expect((Int(second.header("Retry-After") ?? "") ?? 0) > 0, "\(second.header("Retry-After") ?? "no Retry-After")")
        #expect(second.header("RateLimit") != nil)
        #expect(spare.requestsReceived == 1)
        await gateway.shutdown()
        try await quotes.shutdown()
        try await spare.shutdown()
        // A refusal is the backend's limit working, not the gateway failing.
        #expect(recorder.records.filter { $0.level >= .error }.map(\.message) == [])
    }

    @Test("a backend a code handler cannot reach is 502, one that does not answer in time 504, each naming that backend")
    func fetchUnreachable() async throws {
        let down = try RefusingPort.make()
        let hanging = try await BackendServer.start { _ in .hang }
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        let handlers: [String: any CodeHandler] = [
            "down": Fetching(backend: "quotes", target: "/x"), "slow": Fetching(backend: "spare", target: "/x"),
        ]
        let (gateway, port) = try await Self.start(
            handlers: handlers, quotes: down, spare: hanging.port, spareTimeout: "300ms", logger: logger)
        let client = try RawHTTPClient(port: port, receiveTimeout: 30)
        let unreachable = try client.request("GET", "/probe?apiVersion=1")
        #expect(unreachable.status == 502, "\(unreachable.bodyText)")
        #expect(unreachable.header("Content-Type") == "application/problem+json")
        #expect(unreachable.json?["type"] as? String == "urn:portico:problem:backend-unavailable")
        #expect(unreachable.json?["backend"] as? String == "quotes")
        let slow = try await offThePool { try client.request("GET", "/probe?apiVersion=2") }
        #expect(slow.status == 504, "\(slow.bodyText)")
        #expect(slow.json?["type"] as? String == "urn:portico:problem:backend-timeout")
        #expect(slow.json?["backend"] as? String == "spare")
        await gateway.shutdown()
        try await hanging.shutdown()
        #expect(recorder.records.filter { $0.level >= .error }.map(\.message) == [])
        let failed = recorder.records.filter { $0.message == "code handler fetch failed" }
        #expect(failed.map { $0.metadata["backend"]?.description } == ["quotes", "spare"])
        #expect(failed.allSatisfy { $0.level == .notice })
    }

    @Test("a backend body over limits.maxBodyBytes, with a length or chunked, is 502 naming that backend, not the handler's 500")
    func fetchOversized() async throws {
        let body = String(repeating: "x", count: 1500)
        let chunked =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n\(body.prefix(1024))\r\n400\r\n\(body.prefix(1024))\r\n0\r\n\r\n"
        let backend = try await ScriptedBackend.start { request in
            if request.target.hasSuffix("/small") { return [.text("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsmall")] }
            if request.target.hasSuffix("/chunked") { return [.text(chunked)] }
            return [.text("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")]
        }
        let recorder = RecordingLogHandler()
        let handlers: [String: any CodeHandler] = [
            "length": Fetching(target: "/big"), "chunked": Fetching(target: "/chunked"), "small": Fetching(target: "/small"),
            "zown": OwnErrorAfterOversized(),
        ]
        let (gateway, port) = try await Self.start(
            handlers: handlers, quotes: backend.port, spare: backend.port, limits: "limits: { maxBodyBytes: 1KiB }\n",
            logger: Logger(label: "portico.test") { _ in recorder })
        let client = try RawHTTPClient(port: port, receiveTimeout: 30)
        // Versions in the handlers' name order: chunked 1, length 2, small 3, zown 4.
        for version in [1, 2] {
            let response = try client.request("GET", "/probe?apiVersion=\(version)")
            #expect(response.status == 502, "\(response.bodyText)")
            #expect(response.json?["type"] as? String == "urn:portico:problem:backend-unavailable")
            #expect(response.json?["backend"] as? String == "quotes")
        }
        #expect(try client.request("GET", "/probe?apiVersion=3").bodyText == "small")  // under the limit: served
        let own = try client.request("GET", "/probe?apiVersion=4")
        #expect(own.status == 500, "\(own.bodyText)")
        #expect(own.json?["type"] as? String == "urn:portico:problem:internal-error")
        await gateway.shutdown()
        try await backend.shutdown()
        // The handler's own error after the oversized fetch is the one error-level line.
        #expect(recorder.records.filter { $0.level >= .error }.map(\.message) == ["code handler failed"])
        let failed = recorder.records.filter { $0.message == "code handler fetch failed" }
        #expect(failed.count == 2)  // the swallowed oversized fetch is not logged: the handler answered for it
        #expect(failed.allSatisfy { $0.metadata["backend"]?.description == "quotes" && $0.level == .notice })
        #expect(failed.allSatisfy { $0.metadata["error"]?.description.contains("maxBodyBytes") == true })
    }

    @Test("a client that leaves cancels its code handler's fetch, and any it asks for afterwards")
    func fetchCancelled() async throws {
        // The first request is held; later ones are answered by a close, which fails the fetch.
        let seen = Atomic<Int>(0)
        let quotes = try await ScriptedBackend.start { _ in seen.add(1, ordering: .relaxed).newValue == 1 ? [] : [.close] }
        let spare = try await BackendServer.start(handler: DemoBackends.echo)
        let (gateway, port) = try await Self.start(handlers: ["falling": FallingBack()], quotes: quotes.port, spare: spare.port)
        let client = try RawHTTPClient(port: port, receiveTimeout: 10)
        try client.send("GET /probe?apiVersion=1 HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(try await quotes.waitUntil { $0.requestsReceived == 1 })
        client.hangUp()
        #expect(try await quotes.waitUntil { $0.connectionsClosed == 1 })
        #expect(spare.requestsReceived == 0)
        // The handler's second fetch, asked for once its first was cancelled, drew nothing from
        // `spare`'s limit (one an hour): the next request's fetch from it is admitted.
        let response = try RawHTTPClient(port: port, receiveTimeout: 10).request("GET", "/probe?apiVersion=1")
        #expect(response.status == 200, "\(response.bodyText)")
        #expect(spare.requestsReceived == 1)
        await gateway.shutdown()
        try await quotes.shutdown()
        try await spare.shutdown()
    }
}
