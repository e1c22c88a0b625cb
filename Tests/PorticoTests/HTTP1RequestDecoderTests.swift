import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import Portico

/// ``HTTP1RequestDecoder`` read beside NIO's `HTTPRequestDecoder` (llhttp), which it replaced: the
/// same parts from the same bytes, whole and a byte at a time, and a refusal wherever NIO refuses.
@Suite("HTTP/1.1 request decoder")
struct HTTP1RequestDecoderTests {
    /// What a reading produced, with bodies joined (each decoder splits them its own way).
    enum Event: Equatable, CustomStringConvertible {
        case head(method: String, target: String, version: String, fields: [String])
        case body([UInt8])
        case end(trailers: [String]?)
        case refused

        var description: String {
            switch self {
            case .head(let method, let target, let version, let fields): "head(\(method) \(target) \(version) \(fields))"
            case .body(let bytes): "body(\(String(decoding: bytes, as: UTF8.self).debugDescription))"
            case .end(let trailers): "end(\(trailers.map(\.description) ?? "nil"))"
            case .refused: "refused"
            }
        }
    }

    static let maxHeadBytes = 1024
    static let maxFieldCount = 8

    /// A field as `name: value`, the value without trailing whitespace: llhttp keeps it, Portico
    /// drops it (RFC 9112 §5: whitespace around a value is not part of it).
    static func line(_ field: (name: String, value: String)) -> String {
        var value = Substring(field.value)
        while value.last == " " || value.last == "\t" { value = value.dropLast() }
        return "\(field.name): \(value)"
    }

    static func append(_ part: HTTPServerRequestPart, to events: inout [Event]) {
        switch part {
        case .head(let head):
            events.append(
                .head(method: head.method.wireName, target: head.uri, version: "\(head.version)", fields: head.headers.map(line)))
        case .body(var bytes):
            let read = bytes.readBytes(length: bytes.readableBytes) ?? []
            if case .body(let earlier) = events.last {
                events[events.count - 1] = .body(earlier + read)
            } else {
                events.append(.body(read))
            }
        case .end(let trailers):
            events.append(.end(trailers: trailers.map { $0.map(line) }))
        }
    }

    /// NIO's reading, as the gateway configured it before (its limits set to the same numbers).
    static func nio(_ input: String) -> [Event] {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderListSize = maxHeadBytes
        limits.maxHeaderFieldSize = maxHeadBytes
        limits.maxHeaderFieldCount = maxFieldCount
        let channel = EmbeddedChannel(
            handler: ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: limits)))
        var events: [Event] = []
        var refused = false
        do {
            try channel.writeInbound(ByteBuffer(string: input))
        } catch {
            refused = true
        }
        while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) { append(part, to: &events) }
        if refused { events.append(.refused) }
        _ = try? channel.finish()
        return events
    }

    /// Portico's reading, the input cut into pieces of `piece` bytes.
    static func portico(_ input: String, piece: Int = .max) -> [Event] {
        var decoder = HTTP1RequestDecoder(maxHeadBytes: maxHeadBytes, maxFieldCount: maxFieldCount)
        var events: [Event] = []
        var rest = Array(input.utf8)[...]
        repeat {
            let taken = rest.prefix(piece)
            rest = rest.dropFirst(piece)
            decoder.receive(ByteBuffer(bytes: taken))
            do {
                while let part = try decoder.next() { append(part, to: &events) }
            } catch {
                events.append(.refused)
                return events
            }
        } while !rest.isEmpty
        return events
    }

    static let accepted: [String] = [
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /a?b=c#d HTTP/1.0\r\n\r\n",
        "\r\n\r\nGET / HTTP/1.1\r\n\r\n",
        "\nGET / HTTP/1.1\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET http://example.test/x HTTP/1.1\r\n\r\n",
        "CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n",
        "POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
        "POST /p HTTP/1.1\r\nContent-Length: 0\r\n\r\nGET /next HTTP/1.1\r\n\r\n",
        "POST /p HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /next HTTP/1.1\r\nX:  y \t\r\n\r\n",
        "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "POST /p HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1;ext=1\r\na\r\nA\r\n0123456789\r\n0\r\nX-Sum: 1\r\nY: 2\r\n\r\n",
        "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n000A;x\r\n0123456789\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
        "POST /p HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
        "GET / HTTP/1.1\r\nX-Empty:\r\nX-Obs: caf\u{e9}\r\nX-Tab:\ta\tb\t\r\n\r\n",
        "GET / HTTP/1.1\r\nA: 1\r\nA: 2\r\nB: x\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: close\r\n\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\n",
        "GET /%41%2e%2E/ HTTP/1.1\r\n\r\n",
        "DELETE /x HTTP/1.1\r\n\r\nPUT /y HTTP/1.1\r\nContent-Length: 1\r\n\r\nzHEAD /z HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\r\n",
        "POST / HTTP/1.1\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nContent-Length: 2\r\n\r\nab",
        "M-SEARCH * HTTP/1.1\r\n\r\n",
    ]

    static let refused: [String] = [
        "GET / HTTP/1.1\nHost: a\n\n",
        "GET / HTTP/1.1\r\nHost: a\n\r\n",
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
        "GET / HTTP/1.1\r\n Host: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHo\"st: a\r\n\r\n",
        "GET / HTTP/1.1\r\n: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost a\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\u{01}b\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "GET / HTTP/0.9\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",
        "GET / http/1.1\r\n\r\n",
        "GET /a b HTTP/1.1\r\n\r\n",
        "GET HTTP/1.1\r\n\r\n",
        " GET / HTTP/1.1\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\u{03}\u{03}",
        "GET /\u{7f} HTTP/1.1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\na",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nabc",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1 \r\na\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1 ;x\r\na\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF\r\n",
        "GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
        "GET /\(String(repeating: "a", count: 1100)) HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nX: \(String(repeating: "a", count: 1100))\r\n\r\n",
        "GET / HTTP/1.1\r\n" + (0..<9).map { "X\($0): v\r\n" }.joined() + "\r\n",
    ]

    @Test("what NIO's decoder accepts reads the same, whole, a byte at a time and in threes", arguments: accepted)
    func acceptedAlike(input: String) {
        let expected = Self.nio(input)
        #expect(!expected.isEmpty && !expected.contains(.refused))
        #expect(Self.portico(input) == expected)
        #expect(Self.portico(input, piece: 1) == expected)
        #expect(Self.portico(input, piece: 3) == expected)
    }

    /// Portico may refuse a request before its head goes on where llhttp refused it after (a
    /// `Transfer-Encoding` without `chunked` last): never later, and never with other parts.
    @Test("what NIO's decoder refuses is refused, after the same parts or fewer", arguments: refused)
    func refusedAlike(input: String) {
        let expected = Self.nio(input)
        #expect(expected.last == .refused)
        for events in [Self.portico(input), Self.portico(input, piece: 1)] {
            #expect(events.last == .refused)
            #expect(expected.starts(with: events.dropLast()), "\(events) against \(expected)")
        }
    }

    @Test("two spaces in a request line are refused, where llhttp reads past them")
    func doubleSpace() {
        #expect(Self.portico("GET  / HTTP/1.1\r\n\r\n") == [.refused])
        #expect(Self.portico("GET /  HTTP/1.1\r\n\r\n") == [.refused])
    }

    @Test("the errors are the ones the problem answers are made from")
    func errorKinds() {
        func error(_ input: String) -> HTTPParserError? {
            var decoder = HTTP1RequestDecoder(maxHeadBytes: Self.maxHeadBytes, maxFieldCount: Self.maxFieldCount)
            decoder.receive(ByteBuffer(string: input))
            do {
                while try decoder.next() != nil {}
                return nil
            } catch {
                return error
            }
        }
        #expect(error("GET / HTTP/1.1\r\nX: \(String(repeating: "a", count: 1100))\r\n\r\n") == .headerOverflow)
        #expect(error("GET / HTTP/1.1\r\n" + (0..<9).map { "X\($0): v\r\n" }.joined() + "\r\n") == .headerOverflow)
        #expect(error("G(T / HTTP/1.1\r\n") == .invalidMethod)
        #expect(error("\u{16}\u{03}\u{01}") == .invalidMethod)
        #expect(error("GET / HTTP/3.0\r\n\r\n") == .invalidVersion)
        #expect(error("GET /a b HTTP/1.1\r\n\r\n") == .invalidURL)
        #expect(error("POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n") == .invalidContentLength)
        #expect(error("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n") == .unexpectedContentLength)
        #expect(error("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nq\r\n") == .invalidChunkSize)
        #expect(error("GET / HTTP/1.1\r\nConnection: close\r\n\r\nx") == .closedConnection)
    }

    @Test("an extension method is a method (RFC 9110 §9.1), where llhttp knows only its list")
    func extensionMethod() {
        #expect(
            Self.portico("BREW /pot HTTP/1.1\r\n\r\n") == [
                .head(method: "BREW", target: "/pot", version: "HTTP/1.1", fields: []), .end(trailers: nil),
            ])
        #expect(Self.nio("BREW /pot HTTP/1.1\r\n\r\n") == [.refused])
    }

    @Test("after a switch of protocols nothing is read: the bytes wait for whoever takes over")
    func upgradeHoldsBytes() throws {
        var decoder = HTTP1RequestDecoder(maxHeadBytes: Self.maxHeadBytes, maxFieldCount: Self.maxFieldCount)
        decoder.receive(ByteBuffer(string: "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{81}\u{05}hel"))
        var events: [Event] = []
        while let part = try decoder.next() { Self.append(part, to: &events) }
        #expect(events.count == 2)
        #expect(decoder.switchedProtocols)
        decoder.receive(ByteBuffer(string: "lo"))
        #expect(try decoder.next() == nil)
        #expect(decoder.takeUnread().map { String(buffer: $0) } == "\u{81}\u{05}hello")
        #expect(decoder.takeUnread() == nil)
    }

    @Test("an ordinary request, or an Upgrade without Connection: upgrade, switches nothing")
    func noSwitch() throws {
        for input in [
            "GET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", "GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n",
        ] {
            var decoder = HTTP1RequestDecoder(maxHeadBytes: Self.maxHeadBytes, maxFieldCount: Self.maxFieldCount)
            decoder.receive(ByteBuffer(string: input))
            while try decoder.next() != nil {}
            #expect(!decoder.switchedProtocols)
        }
    }

    @Test("after an HTTP/1.0 request with a transfer coding only empty lines may follow (RFC 9112 §6.1: the connection closes)")
    func http10ChunkedCloses() {
        let input = "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n"
        #expect(Self.portico(input).last == .refused)
        #expect(Self.portico(input).count == 3)
    }

    @Test("a read decoded whole leaves no storage held (the channel's receive buffer can be reused), a partial one its rest")
    func letsGoOfReads() throws {
        var decoder = HTTP1RequestDecoder(maxHeadBytes: Self.maxHeadBytes, maxFieldCount: Self.maxFieldCount)
        var read = ByteBufferAllocator().buffer(capacity: 4096)
        read.writeString("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
        decoder.receive(read)
        var parts = 0
        while try decoder.next() != nil { parts += 1 }
        #expect(parts == 3)
        #expect(decoder.heldCapacity == 0)
        decoder.receive(ByteBuffer(string: "GET / HT"))
        #expect(try decoder.next() == nil)
        #expect(decoder.heldCapacity > 0)
    }

    @Test("after a refusal, what arrives is dropped, not kept")
    func dropsAfterRefusal() throws {
        var decoder = HTTP1RequestDecoder(maxHeadBytes: Self.maxHeadBytes, maxFieldCount: Self.maxFieldCount)
        decoder.receive(ByteBuffer(string: "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"))
        #expect(throws: HTTPParserError.invalidHeaderToken) { try decoder.next() }
        for _ in 0..<100 { decoder.receive(ByteBuffer(string: String(repeating: "x", count: 1000))) }
        #expect(try decoder.next() == nil)
        #expect(decoder.heldCapacity == 0)
        #expect(decoder.takeUnread() == nil)
    }

    @Test("the end of input inside a request is an error; between requests it is not")
    func endOfInput() throws {
        for (input, cut) in [
            ("GET / HTTP/1.1\r\n\r\n", false), ("GET / HTTP/1.1\r\n\r\n\r\n", false), ("GET / HTTP/1.1\r\nHo", true),
            ("POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab", true),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab", true),
        ] {
            var decoder = HTTP1RequestDecoder(maxHeadBytes: Self.maxHeadBytes, maxFieldCount: Self.maxFieldCount)
            decoder.receive(ByteBuffer(string: input))
            while try decoder.next() != nil {}
            #expect((decoder.endOfInput() == .invalidEOFState) == cut, "\(input.debugDescription)")
        }
    }
}
