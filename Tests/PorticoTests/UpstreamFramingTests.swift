import Foundation
import NIOCore
import NIOPosix
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// A backend response the gateway must not pass on, named for the test report.
struct BrokenResponse: Sendable, CustomTestStringConvertible {
    var testDescription: String
    var method = "GET"
    var steps: [ScriptedBackend.Step]

    init(_ description: String, method: String = "GET", _ steps: [ScriptedBackend.Step]) {
        self.testDescription = description
        self.method = method
        self.steps = steps
    }

    init(_ description: String, method: String = "GET", _ text: String) {
        self.init(description, method: method, [.text(text)])
    }
}

/// End to end: a backend answer with conflicting framing becomes a 502 problem (or, once a large
/// body's head has gone out, a closed connection short of the promised length), never a response
/// passed through; well-framed answers pass unchanged, framed by the gateway.
@Suite("Upstream response framing through the gateway")
struct UpstreamFramingTests {
    /// Both upstream clients hold backends to the same framing rules; every test runs on each.
    static let clients: [String] = ["nio", "curl"]

    /// - Parameters:
    ///   - global: top-level settings written before the backends (`compression: …`, say);
    ///   - service: settings of the one service (`cache: …`, say).
    static func policy(_ port: Int, client: String, global: String = "", service: String = "") -> String {
        """
        \(global)
        backends:
          inventory: { url: "http://127.0.0.1:\(port)", connectTimeout: 1s, timeout: 10s, client: \(client) }
        services:
          inventory:
            path: /inventory
            \(service)
            versions:
              1: { proxy: { backend: inventory } }
        """
    }

    /// Longer than the upstream flow-control credit, so its head always reaches the client first.
    static let largeLength = 1024 * 1024

    /// Runs `body` with a gateway in front of a scripted backend that answers `/inventory/ok` well
    /// and every other request with `steps`.
    func withBackend(
        _ steps: [ScriptedBackend.Step], client: String, global: String = "", service: String = "",
        _ body: (TestGateway, ScriptedBackend) async throws -> Void
    ) async throws {
        let backend = try await ScriptedBackend.start { request in
            request.target == "/inventory/ok" ? [.text("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")] : steps
        }
        let gateway: TestGateway
        do {
            gateway = try await TestGateway.start(policy: Self.policy(backend.port, client: client, global: global, service: service))
        } catch {
            try? await backend.shutdown()
            throw error
        }
        do {
            try await body(gateway, backend)
        } catch {
            await gateway.shutdown()
            try? await backend.shutdown()
            throw error
        }
        await gateway.shutdown()
        try await backend.shutdown()
    }

    /// A request on `client` that must be answered well, showing the connection and gateway still serve.
    func expectStillServing(_ client: RawHTTPClient, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let response = try client.request("GET", "/inventory/ok")
        #expect(response.status == 200, sourceLocation: sourceLocation)
        #expect(response.bodyText == "ok", sourceLocation: sourceLocation)
    }

    static let brokenResponses: [BrokenResponse] = [
        BrokenResponse(
            "Content-Length beside Transfer-Encoding",
            "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        BrokenResponse(
            "Transfer-Encoding beside Content-Length",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        // libcurl reads the last of two fields and the first value of a list: these bodies match its
        // reading, so only the check on the head stands between them and the client.
        BrokenResponse("two different Content-Length fields", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        BrokenResponse("a Content-Length list of different values", "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello"),
        BrokenResponse("a signed Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello"),
        BrokenResponse(
            "a body cut short by a close",
            [.text("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"), .pause(.milliseconds(200)), .close]),
        BrokenResponse("bytes beyond the body in the same read", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA"),
        BrokenResponse(
            "bytes waiting behind a 32 KiB body",
            [.text("HTTP/1.1 200 OK\r\nContent-Length: 32768\r\n\r\n"), .filler(32767), .text("xEXTRA")]),
        BrokenResponse("bytes after a 204", "HTTP/1.1 204 No Content\r\n\r\nEXTRA"),
        BrokenResponse("a body after a Content-Length of 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nEXTRA"),
        BrokenResponse("a body in an answer to HEAD", method: "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
        // Fields no HTTP/1.1 client may be sent as they are (the gateway checks the heads it writes
        // itself, where NIO's validating handler used to drop the whole answer).
        BrokenResponse("a control byte in a field value", "HTTP/1.1 200 OK\r\nX-Odd: a\u{01}b\r\nContent-Length: 5\r\n\r\nhello"),
        BrokenResponse("a DEL byte in a field value", "HTTP/1.1 200 OK\r\nX-Odd: a\u{7F}b\r\nContent-Length: 5\r\n\r\nhello"),
    ]

    @Test(
        "a backend answer with conflicting framing becomes a 502 problem, and the gateway keeps serving", arguments: brokenResponses,
        clients)
    func conflictingFraming(_ broken: BrokenResponse, upstream: String) async throws {
        try await withBackend(broken.steps, client: upstream) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request(broken.method, "/inventory/item")
            #expect(response.status == 502)
            #expect(response.header("content-type") == "application/problem+json")
            // A HEAD answer has no body to carry the problem; the status and type field say enough.
            if broken.method != "HEAD" {
                let problem = try #require(response.json)
                #expect(problem["type"] as? String == "urn:portico:problem:backend-unavailable")
                #expect(problem["backend"] as? String == "inventory")
            }
            try expectStillServing(client)
        }
    }

    @Test(
        "a field HTTP/1.1 cannot carry is refused (502) on a cached, compressed service too: compressing the answer does not clean it, and it is never stored",
        arguments: clients)
    func unsendableFieldNeitherCompressedNorStored(upstream: String) async throws {
        let body = "[" + Array(repeating: #"{"item":"widget","count":12}"#, count: 80).joined(separator: ",") + "]"
        let answer =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: max-age=60\r\nX-Odd: a\u{01}b\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        try await withBackend(
            [.text(answer)], client: upstream, global: "compression: { algorithms: [gzip], minBytes: 1KiB }",
            service: "cache: { defaultTTL: 30s }"
        ) { gateway, backend in
            let client = try gateway.connect()
            for _ in 0..<2 {
                let response = try client.request("GET", "/inventory/item", headers: [("Accept-Encoding", "gzip")])
                #expect(response.status == 502)
                #expect(response.header("x-odd") == nil)
                #expect(response.json?["type"] as? String == "urn:portico:problem:backend-unavailable")
            }
            // Both refusals were the backend's answer: the first was not kept to answer the second.
            #expect(backend.requestsReceived == 2)
            try expectStillServing(client)
        }
    }

    // MARK: Interim (1xx) answers

    /// A backend that switches protocols unasked, then writes what looks like a response of its own.
    static let forgedAfter101 =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: Upgrade\r\n\r\n"
        + "HTTP/1.1 200 OK\r\nSet-Cookie: session=attacker\r\nContent-Length: 7\r\n\r\nforged!"

    static let earlyHints = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"

    @Test(
        "an unrequested 101 is a 502 on both clients: its bytes never reach the client, a pipelined request keeps its own answer",
        arguments: clients)
    func unrequestedSwitch(upstream: String) async throws {
        try await withBackend([.text(Self.forgedAfter101)], client: upstream) { gateway, backend in
            let client = try gateway.connect()
            try client.send("GET /inventory/item HTTP/1.1\r\nHost: t\r\n\r\nGET /inventory/ok HTTP/1.1\r\nHost: t\r\n\r\n")
            let first = try client.readResponse()
            #expect(first.status == 502)
            #expect(first.json?["type"] as? String == "urn:portico:problem:backend-unavailable")
            #expect(first.header("set-cookie") == nil)
            #expect(!first.bodyText.contains("forged"))
            let second = try client.readResponse()
            #expect(second.status == 200)
            #expect(second.bodyText == "ok")
            // The connection the backend switched was not kept: the second request needed a new one.
            #expect(backend.connectionsAccepted == 2)
        }
    }

    @Test("100, 102 and 103 before the final answer are dropped: the client gets the final answer alone", arguments: clients)
    func interimDropped(upstream: String) async throws {
        let interim =
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n" + Self.earlyHints
            + String(repeating: Self.earlyHints, count: 5)
        let steps: [ScriptedBackend.Step] = [.text(interim), .text("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")]
        try await withBackend(steps, client: upstream) { gateway, _ in
            let client = try gateway.connect()
            try client.send("GET /inventory/item HTTP/1.1\r\nHost: t\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText == "final")
            #expect(response.header("link") == nil)
            try expectStillServing(client)
        }
    }

    @Test("a backend that sends interim answers without end is cut off with a 502", arguments: clients)
    func endlessInterim(upstream: String) async throws {
        // The backend then waits, its connection open, until the test is over.
        let testOver = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        defer { testOver.succeed() }
        let steps: [ScriptedBackend.Step] = [.text(String(repeating: Self.earlyHints, count: 64)), .after(testOver.futureResult), .close]
        try await withBackend(steps, client: upstream) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/inventory/item")
            #expect(response.status == 502)
            #expect(response.json?["type"] as? String == "urn:portico:problem:backend-unavailable")
            try expectStillServing(client)
        }
    }

    @Test(
        "a large body that breaks its length ends the client's connection short of the length it was promised", arguments: [false, true],
        clients)
    func largeBodyMismatch(overlong: Bool, upstream: String) async throws {
        let length = Self.largeLength
        let ending: [ScriptedBackend.Step] = overlong ? [.filler(length - 1), .text("xEXTRA")] : [.filler(length / 2), .close]
        try await withBackend([.text("HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\n\r\n")] + ending, client: upstream) { gateway, _ in
            let client = try gateway.connect()
            try client.send("GET /inventory/big HTTP/1.1\r\nHost: t\r\n\r\n")
            var received = 0
            #expect(throws: RawHTTPClient.ClosedError.self) {
                let response = try client.readResponse { received += $0.count }
                Issue.record("a whole response arrived: \(response.status), \(received) bytes")
            }
            #expect(received < length)
            try expectStillServing(try gateway.connect())
        }
    }

    @Test("a response a backend sends unasked on an idle connection never reaches a client", arguments: clients)
    func unaskedResponse(upstream: String) async throws {
        let first = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"
        let injected = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"
        let later = MultiThreadedEventLoopGroup.singleton.next().makePromise(of: Void.self)
        defer { later.succeed() }
        try await withBackend([.text(first), .after(later.futureResult), .text(injected)], client: upstream) { gateway, backend in
            let client = try gateway.connect()
            #expect(try client.request("GET", "/inventory/first").bodyText == "first")
            // Only once that exchange is over does the backend send a response nobody asked for.
            later.succeed()
            try #require(try await backend.waitUntil { $0.bytesSent == first.utf8.count + injected.utf8.count })
            try expectStillServing(client)
            #expect(backend.connectionsAccepted == 2)
        }
    }

    // MARK: Well-framed answers pass unchanged

    @Test(
        "a Content-Length body passes with the gateway's own single Content-Length",
        arguments: ["5", "05", "5, 5", "5\r\nContent-Length: 5"], clients)
    func contentLengthBody(value: String, upstream: String) async throws {
        let steps: [ScriptedBackend.Step] = [.text("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(value)\r\n\r\nhello")]
        try await withBackend(steps, client: upstream) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/inventory/item")
            // RFC 9110 §8.6 lets a recipient take identical repeated lengths as one; libcurl does,
            // and so does the NIO client's own decoder (``ResponseFraming``'s rule on both paths).
            #expect(response.status == 200)
            #expect(response.bodyText == "hello")
            #expect(response.header("content-type") == "text/plain")
            #expect(response.headers.filter { $0.0.lowercased() == "content-length" }.map(\.1) == ["5"])
            #expect(response.header("transfer-encoding") == nil)
            try expectStillServing(client)
        }
    }

    @Test("a chunked body passes re-chunked, without a length", arguments: [false, true], clients)
    func chunkedBody(closeDelimited: Bool, upstream: String) async throws {
        let steps: [ScriptedBackend.Step] =
            closeDelimited
            ? [.text("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello "), .text("world"), .close]
            : [.text("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n"), .text("5\r\nworld\r\n0\r\n\r\n")]
        try await withBackend(steps, client: upstream) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/inventory/item")
            #expect(response.status == 200)
            #expect(response.bodyText == "hello world")
            #expect(response.header("transfer-encoding") == "chunked")
            #expect(response.header("content-length") == nil)
            try expectStillServing(client)
        }
    }

    @Test("a HEAD answer keeps the length it describes and carries no body", arguments: clients)
    func headAnswer(upstream: String) async throws {
        try await withBackend([.text("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")], client: upstream) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("HEAD", "/inventory/item")
            #expect(response.status == 200)
            #expect(response.header("content-length") == "1000")
            // Had the gateway sent body bytes, they would be read as the next response's start.
            try expectStillServing(client)
        }
    }

    @Test(
        "204 and 304 answers carry neither body nor length",
        arguments: ["204 No Content\r\n", "304 Not Modified\r\n", "304 Not Modified\r\nContent-Length: 1000\r\n"], clients)
    func bodylessAnswer(status: String, upstream: String) async throws {
        try await withBackend([.text("HTTP/1.1 \(status)ETag: \"v1\"\r\n\r\n")], client: upstream) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/inventory/item")
            #expect(response.status == Int(status.prefix(3)))
            #expect(response.header("etag") == "\"v1\"")
            #expect(response.header("content-length") == nil)
            #expect(response.header("transfer-encoding") == nil)
            try expectStillServing(client)
        }
    }

    @Test("a large body streams through whole with its length", arguments: clients)
    func largeBody(upstream: String) async throws {
        let length = Self.largeLength
        try await withBackend([.text("HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\n\r\n"), .filler(length)], client: upstream) {
            gateway, _ in
            let client = try gateway.connect()
            try client.send("GET /inventory/big HTTP/1.1\r\nHost: t\r\n\r\n")
            var received = 0
            let response = try client.readResponse { received += $0.count }
            #expect(response.status == 200)
            #expect(response.header("content-length") == String(length))
            #expect(received == length)
            try expectStillServing(client)
        }
    }
}
