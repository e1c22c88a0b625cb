import NIOCore
import NIOPosix
import PorticoDemoBackends
import Testing

@testable import PorticoUpstream

/// The libcurl client holds backends to their response framing: every conflict fails the exchange
/// with `.badResponse`, and a small response is delivered only once it is proven whole.
@Suite("Backend response framing")
struct ResponseFramingTests {
    let group = MultiThreadedEventLoopGroup.singleton

    /// A well-framed answer to `/ok`, so a test can show what happens to the next exchange.
    static let okResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    /// Starts a backend that answers `/ok` well and everything else with `steps`, runs one exchange
    /// for `path` with `method`, then one for `/ok`; returns both outcomes and the backend's count
    /// of accepted connections.
    func exchanges(
        _ steps: [ScriptedBackend.Step], method: String = "GET", timeout: Duration = .seconds(10)
    ) async throws -> (first: Outcome, next: Outcome, connections: Int) {
        let backend = try await ScriptedBackend.start { request in
            request.target == "/ok" ? [.text(Self.okResponse)] : steps
        }
        let client = CurlUpstreamClient()
        defer { client.shutdown() }
        let url = "http://127.0.0.1:\(backend.port)"
        let first = try await exchange(client, UpstreamRequest(method: method, url: url + "/", timeout: timeout), on: group.next())
        let next = try await exchange(client, UpstreamRequest(method: "GET", url: url + "/ok"), on: group.next())
        let connections = backend.connectionsAccepted
        try await backend.shutdown()
        return (first, next, connections)
    }

    /// The exchange failed as a bad response and delivered nothing but that failure.
    func expectRefusedWhole(_ outcome: Outcome, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(outcome.failureKind == .badResponse, "got \(String(describing: outcome.result))", sourceLocation: sourceLocation)
        #expect(outcome.head == nil, sourceLocation: sourceLocation)
        #expect(outcome.body.readableBytes == 0, sourceLocation: sourceLocation)
        #expect(outcome.deliveries == 1, sourceLocation: sourceLocation)
    }

    // MARK: Conflicting heads

    @Test(
        "a head that frames its body two ways is refused, and its connection is not used again",
        arguments: [
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            // libcurl reads the last of two fields and the first value of a list; each body here
            // matches libcurl's reading, so nothing but the check on the head refuses it.
            "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            "Content-Length: 6\r\nContent-Length: 5\r\n\r\nhello",
            "Content-Length: 5, 6\r\n\r\nhello",
            "Content-Length: +5\r\n\r\nhello",
            "Content-Length: 5x\r\n\r\nhello",
        ])
    func conflictingHead(fieldsAndBody: String) async throws {
        let (first, next, connections) = try await exchanges([.text("HTTP/1.1 200 OK\r\n" + fieldsAndBody)])
        expectRefusedWhole(first)
        if case .failure(let error) = first.result { #expect(error.detail.contains("Content-Length")) }
        #expect(next.succeeded)
        #expect(String(buffer: next.body) == "ok")
        #expect(connections == 2)
    }

    @Test("repeated identical Content-Length values are read as one", arguments: ["5\r\nContent-Length: 5", "5, 5", "5,5"])
    func identicalContentLengths(value: String) async throws {
        let (first, _, _) = try await exchanges([.text("HTTP/1.1 200 OK\r\nContent-Length: \(value)\r\n\r\nhello")])
        #expect(first.succeeded)
        #expect(first.head?.contentLength == 5)
        #expect(String(buffer: first.body) == "hello")
    }

    // MARK: Bodies that do not match their Content-Length

    @Test("a small body cut short by a close is refused whole, not delivered in part")
    func shortSmallBody() async throws {
        // The pause makes libcurl read the head well before the close, so a client that shipped the
        // head on arrival would have delivered it; with the hold-back the outcome does not depend on it.
        let (first, next, _) = try await exchanges([
            .text("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"), .pause(.milliseconds(200)), .close,
        ])
        expectRefusedWhole(first)
        #expect(next.succeeded)
    }

    @Test("a small body that stalls short of its length is refused whole at the timeout")
    func stalledSmallBody() async throws {
        let (first, _, _) = try await exchanges(
            [.text("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")], timeout: .milliseconds(500))
        #expect(first.failureKind == .timedOut)
        #expect(first.head == nil)
        #expect(first.deliveries == 1)
    }

    @Test("bytes beyond a small body's length in the same read are refused")
    func excessInTheSameRead() async throws {
        let (first, next, connections) = try await exchanges([.text("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA")])
        expectRefusedWhole(first)
        #expect(next.succeeded)
        #expect(connections == 2)
    }

    @Test("bytes waiting behind a held body's last byte are refused")
    func excessWaitingBehindHeldBody() async throws {
        // 32 KiB cannot arrive in libcurl's first (16 KiB) read, and later reads stop at the declared
        // length, so the excess, sent in one segment with the last byte, is left on the socket.
        let length = 32 * 1024
        let (first, next, connections) = try await exchanges([
            .text("HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\n\r\n"), .filler(length - 1), .text("xEXTRA"),
        ])
        expectRefusedWhole(first)
        #expect(next.succeeded)
        #expect(String(buffer: next.body) == "ok")
        #expect(connections == 2)
    }

    /// Longer than the flow-control credit (256 KiB), so a body this long cannot reach the receiver
    /// in the turn its head does: the head of a streamed body always goes out first.
    static let largeLength = 1024 * 1024

    @Test("a large body streams, and one that breaks its length fails before delivering all of it", arguments: [false, true])
    func largeBodyMismatch(overlong: Bool) async throws {
        let length = Self.largeLength
        let ending: [ScriptedBackend.Step] = overlong ? [.filler(length - 1), .text("xEXTRA")] : [.filler(length / 2), .close]
        let (first, next, connections) = try await exchanges([.text("HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\n\r\n")] + ending)
        #expect(first.failureKind == .badResponse)
        #expect(first.head?.contentLength == length)
        #expect(first.headDelivery == 1)
        // The receiver never gets the whole declared length, so a client told that length sees the cut.
        #expect(first.body.readableBytes < length)
        #expect(next.succeeded)
        #expect(connections == 2)
    }

    @Test(
        "bytes after a response without a body are refused, and its connection is not used again",
        arguments: [
            ("GET", "HTTP/1.1 204 No Content\r\n\r\nEXTRA"),
            ("GET", "HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\n\r\nEXTRA"),
            ("GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nEXTRA"),
            ("HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
        ])
    func excessAfterBodylessResponse(method: String, response: String) async throws {
        let (first, next, connections) = try await exchanges([.text(response)], method: method)
        expectRefusedWhole(first)
        #expect(next.succeeded)
        #expect(connections == 2)
    }

    @Test("bytes a backend sends on an idle connection are not read as the next exchange's response")
    func staleBytesOnIdleConnection() async throws {
        let first = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"
        let injected = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"
        let later = group.next().makePromise(of: Void.self)
        defer { later.succeed() }
        let backend = try await ScriptedBackend.start { request in
            request.target == "/first" ? [.text(first), .after(later.futureResult), .text(injected)] : [.text(Self.okResponse)]
        }
        let client = CurlUpstreamClient()
        defer { client.shutdown() }
        let url = "http://127.0.0.1:\(backend.port)"
        let one = try await exchange(client, UpstreamRequest(method: "GET", url: url + "/first"), on: group.next())
        #expect(one.succeeded)
        #expect(String(buffer: one.body) == "first")

        // Only once that exchange is over does the backend send a response nobody asked for.
        later.succeed()
        try #require(try await backend.waitUntil { $0.bytesSent == first.utf8.count + injected.utf8.count })
        let two = try await exchange(client, UpstreamRequest(method: "GET", url: url + "/ok"), on: group.next())
        #expect(two.succeeded)
        #expect(String(buffer: two.body) == "ok")
        // The pooled connection was given up before the request was sent, and the exchange ran on a new one.
        #expect(backend.connectionsAccepted == 2)
        #expect(backend.requestsReceived == 2)
        try await backend.shutdown()
    }

    // MARK: Well-framed responses

    @Test("a small response arrives with its checked length, as head, body and end in one delivery")
    func smallResponse() async throws {
        let (first, _, connections) = try await exchanges([.text("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")])
        #expect(first.succeeded)
        #expect(first.head?.status == 200)
        #expect(first.head?.contentLength == 5)
        #expect(String(buffer: first.body) == "hello")
        #expect(first.deliveries == 1)
        #expect(connections == 1)
    }

    @Test("a small response sent in pieces still arrives in one delivery")
    func smallResponseInPieces() async throws {
        let (first, _, _) = try await exchanges([
            .text("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"), .pause(.milliseconds(100)), .text("world"),
        ])
        #expect(first.succeeded)
        #expect(String(buffer: first.body) == "helloworld")
        #expect(first.deliveries == 1)
    }

    @Test("a chunked response is decoded and has no length")
    func chunkedResponse() async throws {
        let (first, _, connections) = try await exchanges([
            .text("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"), .text("6\r\n world\r\n0\r\n\r\n"),
        ])
        #expect(first.succeeded)
        #expect(first.head?.contentLength == nil)
        #expect(String(buffer: first.body) == "hello world")
        #expect(connections == 1)
    }

    @Test("a body delimited by the backend's close has no length")
    func closeDelimitedResponse() async throws {
        let (first, _, _) = try await exchanges([.text("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello"), .close])
        #expect(first.succeeded)
        #expect(first.head?.contentLength == nil)
        #expect(String(buffer: first.body) == "hello")
    }

    @Test("an interim 1xx head does not count as the response's framing")
    func interimResponse() async throws {
        let (first, _, _) = try await exchanges([
            .text("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        ])
        #expect(first.succeeded)
        #expect(first.head?.status == 200)
        #expect(String(buffer: first.body) == "hello")
    }

    @Test("HEAD, 204 and 304 answers carry no body; HEAD and 304 keep the length they describe")
    func bodylessResponses() async throws {
        let (head, _, _) = try await exchanges([.text("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")], method: "HEAD")
        #expect(head.succeeded)
        #expect(head.head?.contentLength == 1000)
        #expect(head.body.readableBytes == 0)

        let (noContent, _, _) = try await exchanges([.text("HTTP/1.1 204 No Content\r\n\r\n")])
        #expect(noContent.succeeded)
        #expect(noContent.head?.status == 204)
        #expect(noContent.head?.contentLength == nil)

        let (notModified, _, connections) = try await exchanges([
            .text("HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nContent-Length: 1000\r\n\r\n")
        ])
        #expect(notModified.succeeded)
        #expect(notModified.head?.status == 304)
        #expect(notModified.head?.contentLength == 1000)
        #expect(notModified.body.readableBytes == 0)
        #expect(connections == 1)
    }

    @Test("a large response streams: its head arrives before its end")
    func largeResponseStreams() async throws {
        let length = Self.largeLength
        let (first, _, connections) = try await exchanges([.text("HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\n\r\n"), .filler(length)])
        #expect(first.succeeded)
        #expect(first.head?.contentLength == length)
        #expect(first.body.readableBytes == length)
        #expect(first.headDelivery == 1)
        #expect(first.deliveries > 1)
        #expect(connections == 1)
    }

    // MARK: Parsing

    @Test("Content-Length values: digits only, lists of one value")
    func contentLengthParsing() {
        func framing(_ values: [String]) -> ResponseFraming? {
            try? ResponseFraming.of(status: 200, headers: values.map { ("Content-Length", $0) }, requestIsHEAD: false).get()
        }
        #expect(framing(["0"])?.body == .length(0))
        #expect(framing([" 12 "])?.body == .length(12))
        #expect(framing(["7, 7", "7"])?.contentLength == 7)
        #expect(framing(["999999999999999999"])?.contentLength == 999_999_999_999_999_999)
        for bad in ["", " ", "-1", "+1", "1.0", "0x10", "1 2", "1,", ",1", "1, 2", "1234567890123456789"] {
            #expect(framing([bad]) == nil, "\(bad) accepted")
        }
        #expect(framing(["1", "2"]) == nil)
    }

    @Test("a transfer coding frames the body only when chunked is its final coding (RFC 9112 §6.3)")
    func transferCodingParsing() {
        func body(_ values: [String]) -> ResponseFraming.Body? {
            try? ResponseFraming.of(status: 200, headers: values.map { ("Transfer-Encoding", $0) }, requestIsHEAD: false).get().body
        }
        #expect(body(["chunked"]) == .transferCoded)
        #expect(body(["gzip, Chunked "]) == .transferCoded)
        #expect(body(["gzip", "chunked"]) == .transferCoded)
        #expect(body(["gzip"]) == .untilClose)
        #expect(body(["chunked, gzip"]) == .untilClose)
        #expect(body(["chunked", "gzip"]) == .untilClose)
    }
}
