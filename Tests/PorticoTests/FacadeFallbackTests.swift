import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// A facade falls back, source by source, on each kind of failure; with nothing left it answers
/// 502 naming the source (and the field) instead of a half-filled object.
@Suite("Facade fallback")
struct FacadeFallbackTests {
    /// `first` (JSON, on `primary`) is active; `second` (the demo CSV feed, on `secondary`) is its fallback.
    /// The primary's timeout is short only where a test needs it to pass: on a loaded machine a
    /// short one could turn any test's answer into a timeout and a fallback. The connect timeouts
    /// and the secondary's are long for the same reason: a 1 s connect timeout (a `.timedOut`, so
    /// a 504) once failed the fallback on CI while Chromium and builds shared its two cores.
    static func policy(primary: Int, secondary: Int, extra: String = "", primaryTimeout: String = "10s") -> String {
        """
        backends:
          primary: { url: "http://127.0.0.1:\(primary)", connectTimeout: 10s, timeout: \(primaryTimeout) }
          secondary: { url: "http://127.0.0.1:\(secondary)", connectTimeout: 10s, timeout: 20s }
        services:
          quote:
            path: /quote
            versions:
              1:
                facade:
                  parameters: /{symbol}
                  contract: { symbol: string, price: number }
                  sources:
                    first:
                      backend: primary
                      request: /q?s={symbol}
                      format: json
                      fields: { symbol: /symbol, price: /price }
                    second:
                      backend: secondary
                      request: /quotes.csv?s={symbol}
                      format: csv
                      fields: { symbol: "0", price: { column: 2, convert: [number] } }
                  active: first
                  fallback: [second]
        \(extra)
        """
    }

    static let answer = #"{"symbol":"AAPL","price":189.84}"#

    static func json(_ status: HTTPResponseStatus, _ text: String) -> BackendResponse {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        return .full(status: status, headers: headers, body: ByteBuffer(string: text))
    }

    enum Failure: String, CaseIterable, CustomTestStringConvertible {
        case down, timingOut, answering500, missingField, malformed
        var testDescription: String { rawValue }

        var handler: BackendServer.Handler? {
            switch self {
            case .down: nil
            case .timingOut: { _ in .hang }
            case .answering500: { _ in FacadeFallbackTests.json(.internalServerError, #"{"symbol":"AAPL","price":1}"#) }
            case .missingField: { _ in FacadeFallbackTests.json(.ok, #"{"symbol":"AAPL"}"#) }
            case .malformed: { _ in FacadeFallbackTests.json(.ok, #"{"symbol":"AAPL","price":"#) }
            }
        }
    }

    @Test("the active source failing falls back to the next, and the access log names the one that served", arguments: Failure.allCases)
    func fallsBack(failure: Failure) async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        let secondary = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        var primary: BackendServer?
        if let handler = failure.handler { primary = try await BackendServer.start(handler: handler) }
        var primaryPort = primary?.port ?? 0
        if primary == nil { primaryPort = try RefusingPort.make() }
        let timeout = failure == .timingOut ? "300ms" : "10s"
        let gateway = try await TestGateway.start(
            policy: Self.policy(primary: primaryPort, secondary: secondary.port, primaryTimeout: timeout), logger: logger)
        let client = try gateway.connect(receiveTimeout: 60)
        let response = try await offThePool { try client.request("GET", "/quote/AAPL") }
        #expect(response.status == 200, "\(response.bodyText)")
        #expect(response.bodyText == Self.answer)
        if let primary { #expect(primary.requestsReceived == 1) }
        let served = primary
        #expect(secondary.requestsReceived == 1)
        await gateway.shutdown()
        try? await served?.shutdown()
        try await secondary.shutdown()
        let access = recorder.records.filter { $0.message == "access" }
        #expect(access.map { $0.metadata["source"]?.description } == ["second"])
        let failed = recorder.records.filter { $0.message == "facade source failed" }
        #expect(failed.map { $0.metadata["source"]?.description } == ["first"])
    }

    @Test("a healthy active source serves alone")
    func activeServes() async throws {
        let primary = try await BackendServer.start { _ in Self.json(.ok, #"{"price":189.84,"symbol":"AAPL","extra":true}"#) }
        let secondary = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        let gateway = try await TestGateway.start(policy: Self.policy(primary: primary.port, secondary: secondary.port))
        let response = try gateway.connect().request("GET", "/quote/AAPL")
        #expect(response.status == 200)
        #expect(response.bodyText == Self.answer)
        #expect(secondary.requestsReceived == 0)
        await gateway.shutdown()
        try await primary.shutdown()
        try await secondary.shutdown()
    }

    @Test("every source down gives a 502 problem naming the source tried last")
    func allDown() async throws {
        let gateway = try await TestGateway.start(
            policy: Self.policy(primary: try RefusingPort.make(), secondary: try RefusingPort.make()))
        let response = try gateway.connect().request("GET", "/quote/AAPL")
        #expect(response.status == 502)
        #expect(response.header("Content-Type") == "application/problem+json")
        #expect(response.json?["source"] as? String == "second")
        #expect(response.json?["type"] as? String == "urn:portico:problem:facade-source-failed")
        #expect(response.json?["field"] == nil)
        await gateway.shutdown()
    }

    @Test("when no source can produce a required field, the 502 names the field and the source")
    func missingEverywhere() async throws {
        let primary = try await BackendServer.start { _ in Self.json(.ok, #"{"symbol":"AAPL"}"#) }
        let secondary = try await BackendServer.start { _ in
            .full(status: .ok, headers: HTTPHeaders(), body: ByteBuffer(string: "\"AAPL\",\"Apple\"\n"))
        }
        let gateway = try await TestGateway.start(policy: Self.policy(primary: primary.port, secondary: secondary.port))
        let response = try gateway.connect().request("GET", "/quote/AAPL")
        #expect(response.status == 502)
        #expect(response.json?["field"] as? String == "price")
        #expect(response.json?["source"] as? String == "second")
        #expect((response.json?["detail"] as? String)?.contains("\"price\"") == true)
        #expect(!response.bodyText.contains("AAPL"), "no half-filled object: \(response.bodyText)")
        await gateway.shutdown()
        try await primary.shutdown()
        try await secondary.shutdown()
    }

    @Test("a source body over the facade's size limit fails that source instead of being buffered")
    func oversized() async throws {
        let primary = try await BackendServer.start { _ in
            Self.json(.ok, #"{"symbol":"AAPL","price":1,"padding":""# + String(repeating: "x", count: 4096) + #""}"#)
        }
        let secondary = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        let policy = Self.policy(primary: primary.port, secondary: secondary.port)
            .replacingOccurrences(of: "fallback: [second]", with: "fallback: [second]\n          maxBodyBytes: 1KiB")
        let gateway = try await TestGateway.start(policy: policy)
        let response = try gateway.connect().request("GET", "/quote/AAPL")
        #expect(response.status == 200)
        #expect(response.bodyText == Self.answer)
        await gateway.shutdown()
        try await primary.shutdown()
        try await secondary.shutdown()
    }

    @Test("a 404 from the source is the client's 404, not a reason to fall back")
    func notFound() async throws {
        let primary = try await BackendServer.start { _ in Self.json(.notFound, #"{"error":"unknown"}"#) }
        let secondary = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        let gateway = try await TestGateway.start(policy: Self.policy(primary: primary.port, secondary: secondary.port))
        let response = try gateway.connect().request("GET", "/quote/NOPE")
        #expect(response.status == 404)
        #expect(response.json?["source"] as? String == "first")
        #expect(secondary.requestsReceived == 0)
        await gateway.shutdown()
        try await primary.shutdown()
        try await secondary.shutdown()
    }

    @Test("a client that goes away cancels its facade's fetch: the backend's connection is closed, not left to its timeout")
    func clientLeaves() async throws {
        let primary = try await ScriptedBackend.start { _ in [] }
        let secondary = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        let policy = Self.policy(primary: primary.port, secondary: secondary.port, primaryTimeout: "120s")
        let gateway = try await TestGateway.start(policy: policy)
        let client = try gateway.connect()
        try client.send("GET /quote/AAPL HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(try await primary.waitUntil { $0.requestsReceived == 1 })
        client.hangUp()
        #expect(try await primary.waitUntil { $0.connectionsClosed == 1 })
        #expect(secondary.requestsReceived == 0)
        await gateway.shutdown()
        try await primary.shutdown()
        try await secondary.shutdown()
    }

    @Test("a facade answers GET, and HEAD without the body; other methods get 405")
    func methods() async throws {
        let primary = try await BackendServer.start { _ in Self.json(.ok, #"{"symbol":"AAPL","price":189.84}"#) }
        let gateway = try await TestGateway.start(policy: Self.policy(primary: primary.port, secondary: try RefusingPort.make()))
        let client = try gateway.connect()
        let head = try client.request("HEAD", "/quote/AAPL")
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == String(Self.answer.utf8.count))
        #expect(head.body.isEmpty)
        let post = try client.request("POST", "/quote/AAPL", body: "{}")
        #expect(post.status == 405)
        #expect(post.header("Allow") == "GET, HEAD")
        // The connection still serves: the HEAD answer's framing was right.
        #expect(try client.request("GET", "/quote/AAPL").bodyText == Self.answer)
        #expect(primary.requestsReceived == 2)
        await gateway.shutdown()
        try await primary.shutdown()
    }

    @Test(
        "an XML source whose body declares a DOCTYPE or an entity fails, and the fallback serves",
        arguments: [
            #"<!DOCTYPE q [<!ENTITY x SYSTEM "file:///etc/passwd">]><q><symbol>AAPL</symbol><price>&x;</price></q>"#,
            #"<!DOCTYPE q [<!ENTITY a "1"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><q><symbol>AAPL</symbol><price>&b;</price></q>"#,
        ])
    func xmlDeclarationsFallBack(body: String) async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        let primary = try await BackendServer.start { _ in
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/xml")
            return .full(status: .ok, headers: headers, body: ByteBuffer(string: body))
        }
        let secondary = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        let policy = Self.policy(primary: primary.port, secondary: secondary.port)
            .replacingOccurrences(of: "format: json", with: "format: xml")
            .replacingOccurrences(
                of: "fields: { symbol: /symbol, price: /price }",
                with: "fields: { symbol: q/symbol, price: { path: q/price, convert: [number] } }")
        let gateway = try await TestGateway.start(policy: policy, logger: logger)
        let response = try gateway.connect().request("GET", "/quote/AAPL")
        #expect(response.status == 200, "\(response.bodyText)")
        #expect(response.bodyText == Self.answer)
        #expect(primary.requestsReceived == 1)
        #expect(secondary.requestsReceived == 1)
        await gateway.shutdown()
        try await primary.shutdown()
        try await secondary.shutdown()
        let failed = recorder.records.filter { $0.message == "facade source failed" }
        #expect(failed.map { $0.metadata["source"]?.description } == ["first"])
        #expect(failed.first?.metadata["reason"]?.description.contains("DOCTYPE") == true)
    }
}
