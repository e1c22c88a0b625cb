import NIOCore
import NIOPosix
import PorticoDemoBackends
import Testing

@testable import PorticoUpstream

@Suite("The NIO upstream client and badly framed responses")
struct NIOUpstreamFramingTests {
    let group = MultiThreadedEventLoopGroup.singleton

    static let good = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood"

    /// Sends one request answered with `first`, then a second one answered well, and reports the
    /// first outcome and the connections the backend accepted for both.
    func exchange(
        answering first: [ScriptedBackend.Step]
    ) async throws -> (outcome: ExchangeOutcome, connections: Int, second: ExchangeOutcome) {
        let backend = try await ScriptedBackend.start { request in
            request.method == "GET" && request.target == "/first" ? first : [.text(Self.good)]
        }
        let client = NIOUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let base = "http://127.0.0.1:\(backend.port)"
        let outcome = try await Exchanges.run(client, UpstreamRequest(method: "GET", url: "\(base)/first"), on: loop)
        let second = try await Exchanges.run(client, UpstreamRequest(method: "GET", url: "\(base)/second"), on: loop)
        let connections = backend.connectionsAccepted
        try await backend.shutdown()
        return (outcome, connections, second)
    }

    static let refused: [(name: String, response: String)] = [
        (
            "Content-Length and Transfer-Encoding",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        ),
        ("two different Content-Lengths", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        ("extra bytes after the response", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA"),
        ("a bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
        ("a status line that is not HTTP", "HTTP/9 OK\r\n\r\n"),
        ("an upgrade nobody asked for", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n"),
    ]

    @Test("conflicting or broken framing is refused before the head reaches the gateway, and the connection is dropped")
    func refusedFraming() async throws {
        for (name, response) in Self.refused {
            let (outcome, connections, second) = try await exchange(answering: [.text(response)])
            #expect(outcome.errorKind == .badResponse, "\(name)")
            #expect(outcome.head == nil, "\(name): the gateway must still be able to answer 502")
            #expect(second.text == "good", "\(name)")
            #expect(connections == 2, "\(name): a connection is never reused after an error")
        }
    }

    @Test("a body shorter than its Content-Length, cut by a close, fails the exchange")
    func truncatedBody() async throws {
        let (outcome, connections, second) = try await exchange(
            answering: [.text("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"), .close])
        #expect(outcome.errorKind == .badResponse)
        #expect(second.text == "good")
        #expect(connections == 2)
    }

    @Test("a close after the head and before any body fails the exchange")
    func closeAfterHead() async throws {
        let (outcome, _, _) = try await exchange(answering: [.text("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"), .close])
        #expect(outcome.errorKind == .badResponse)
    }

    @Test("a backend that closes without answering fails a first request without retrying it")
    func closeWithoutAnswer() async throws {
        let (outcome, connections, second) = try await exchange(answering: [.close])
        #expect(outcome.errorKind == .badResponse)
        #expect(outcome.head == nil)
        #expect(second.text == "good")
        #expect(connections == 2)
    }

    @Test("valid responses that do not allow keep-alive succeed, and their connection is not reused")
    func notReused() async throws {
        let cases: [(name: String, reply: [ScriptedBackend.Step], body: String)] = [
            ("a body that ends by close", [.text("HTTP/1.1 200 OK\r\n\r\nuntil the end"), .close], "until the end"),
            ("Connection: close", [.text("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"), .close], "ok"),
            ("HTTP/1.0 without keep-alive", [.text("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"), .close], "ok"),
        ]
        for (name, reply, body) in cases {
            let (outcome, connections, second) = try await exchange(answering: reply)
            #expect(outcome.succeeded, "\(name)")
            #expect(outcome.text == body, "\(name)")
            #expect(second.text == "good", "\(name)")
            #expect(connections == 2, "\(name)")
        }
    }

    @Test("chunked bodies and informational responses are decoded, and the connection is reused")
    func validFraming() async throws {
        let (chunked, connections, _) = try await exchange(
            answering: [.text("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")])
        #expect(chunked.text == "abcde")
        #expect(connections == 1)
        let (informational, again, _) = try await exchange(
            answering: [.text("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")])
        #expect(informational.head?.status == 200)
        #expect(informational.text == "ok")
        #expect(again == 1)
    }
}
