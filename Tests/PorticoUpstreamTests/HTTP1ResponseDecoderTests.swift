import NIOCore
import NIOHTTP1
import Testing

@testable import PorticoUpstream

/// Portico's own HTTP/1.1 response decoder: what it reads from a backend's bytes however they are
/// cut into reads, what it refuses, and what a close means.
@Suite("The HTTP/1.1 response decoder")
struct HTTP1ResponseDecoderTests {
    /// What the decoder made of `pieces`, one line per part (consecutive body parts joined, since
    /// how a body is sliced depends on the reads), then the error or `more` if it waits for bytes.
    static func transcript(_ pieces: [String], toHEAD: Bool = false, responses: Int = 1) -> [String] {
        var decoder = HTTP1ResponseDecoder()
        decoder.expectResponse(toHEAD: toHEAD)
        var lines: [String] = []
        var body = ""
        var ended = 0
        func flushBody() {
            if !body.isEmpty { lines.append("body \(body)") }
            body = ""
        }
        for piece in pieces {
            decoder.receive(ByteBuffer(string: piece))
            while true {
                let part: HTTP1ResponseDecoder.Part?
                do {
                    part = try decoder.next()
                } catch {
                    flushBody()
                    lines.append("refused: \(error.detail)")
                    return lines
                }
                guard let part else { break }
                switch part {
                case .interim(let status):
                    lines.append("interim \(status)")
                case .head(let head, let framing, let keepAlive):
                    let fields = head.headers.map { "\($0.name)=\($0.value)" }.joined(separator: ",")
                    lines.append(
                        "head \(head.status) \(framing.body) length=\(head.contentLength.map(String.init) ?? "-") keep=\(keepAlive) [\(fields)]"
                    )
                case .body(let bytes):
                    body += String(buffer: bytes)
                case .end:
                    flushBody()
                    lines.append("end")
                    ended += 1
                    if ended < responses { decoder.expectResponse(toHEAD: toHEAD) }
                }
            }
        }
        flushBody()
        return lines
    }

    /// The transcripts of `input` fed whole, byte by byte, and cut in two at every position.
    static func allCuts(_ input: String, toHEAD: Bool = false, responses: Int = 1) -> [[String]] {
        let bytes = Array(input.utf8)
        var cuts = [[input], bytes.map { String(decoding: [$0], as: UTF8.self) }]
        for cut in 1..<bytes.count {
            cuts.append([String(decoding: bytes[..<cut], as: UTF8.self), String(decoding: bytes[cut...], as: UTF8.self)])
        }
        return cuts.map { transcript($0, toHEAD: toHEAD, responses: responses) }
    }

    @Test(
        "a response reads the same whole, byte by byte and cut in two anywhere",
        arguments: [
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b c \r\n\r\nhello",
                ["head 200 length(5) length=5 keep=true [Content-Length=5,X-A=b c]", "body hello", "end"]
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n",
                ["head 200 transferCoded length=- keep=true [Transfer-Encoding=chunked]", "body hello world", "end"]
            ),
            (
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
                ["interim 100", "interim 103", "head 204 none length=9 keep=true [Content-Length=9]", "end"]
            ),
            (
                "\r\n\nHTTP/1.0 200\nContent-Type: text/plain\n\nuntil the close",
                ["head 200 untilClose length=- keep=false [Content-Type=text/plain]", "body until the close"]
            ),
            (
                "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000000005\r\nhello\r\n0\r\n\r\n",
                [
                    "head 200 transferCoded length=- keep=false [Connection=keep-alive,Transfer-Encoding=chunked]", "body hello", "end",
                ]
            ),
            (
                "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
                ["head 200 length(0) length=0 keep=true [Connection=Keep-Alive,Content-Length=0]", "end"]
            ),
            (
                "HTTP/1.1 304 Not Modified\r\nConnection: keep-alive, close\r\nContent-Length: 42\r\n\r\n",
                ["head 304 none length=42 keep=false [Connection=keep-alive, close,Content-Length=42]", "end"]
            ),
        ])
    func readsAlikeHoweverCut(input: String, expected: [String]) {
        for (index, transcript) in Self.allCuts(input).enumerated() {
            #expect(transcript == expected, "cut \(index)")
        }
    }

    @Test("a response to HEAD has no body whatever its fields say, and the next response follows it")
    func headResponses() {
        let input = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        let expected = [
            "head 200 none length=5 keep=true [Content-Length=5]", "end",
            "head 200 none length=- keep=true [Transfer-Encoding=chunked]", "end",
        ]
        for transcript in Self.allCuts(input, toHEAD: true, responses: 2) {
            #expect(transcript == expected)
        }
    }

    @Test(
        "bytes that are not the response expected are refused, with the reason",
        arguments: [
            ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabc", "bytes after the end of its response"),
            ("HTTP/1.1 200 OK\r\nX-A: b\rc\r\n\r\n", "bare CR"),
            ("HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\n\r\n", "folded"),
            ("HTTP/1.1 200 OK\r\nX-A : b\r\n\r\n", "not a token"),
            ("HTTP/1.1 200 OK\r\nX-A b\r\n\r\n", "no colon"),
            ("HTTP/1.1 200 OK\r\nX-A: b\u{1}c\r\n\r\n", "control byte"),
            ("HTTP/2 200 OK\r\n\r\n", "not HTTP/1.x"),
            ("ICY 200 OK\r\n\r\n", "not HTTP/1.x"),
            ("HTTP/1.1 20 OK\r\n\r\n", "three digits"),
            ("HTTP/1.1 099 Low\r\n\r\n", "three digits from 100"),
            ("HTTP/1.1 200OK\r\n\r\n", "reason phrase"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "conflicting Content-Length"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n", "holds no size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\n", "malformed"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", "more than 15 digits"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", "longer than its size"),
        ])
    func refusals(input: String, reason: String) {
        for transcript in Self.allCuts(input) {
            guard let last = transcript.last, last.hasPrefix("refused: ") else {
                Issue.record("expected a refusal, got \(transcript)")
                return
            }
            #expect(last.contains(reason), "\(last)")
        }
    }

    @Test("a head or a trailer section over 80 KiB is refused before it ends, and one just under it is read")
    func headLimit() {
        let prefix = "HTTP/1.1 200 OK\r\nX-Big: "
        let suffix = "\r\nContent-Length: 0\r\n\r\n"
        let fits =
            prefix + String(repeating: "a", count: HTTP1ResponseDecoder.maxHeadBytes - prefix.utf8.count - suffix.utf8.count) + suffix
        #expect(Self.transcript([fits]).last == "end")
        // Never ended: refused once more than the limit has arrived, not held for ever.
        let endless = Array(repeating: "a", count: HTTP1ResponseDecoder.maxHeadBytes / 1024 + 1).map { _ in
            String(repeating: "a", count: 1024)
        }
        #expect(Self.transcript([prefix] + endless).last?.contains("over \(HTTP1ResponseDecoder.maxHeadBytes) bytes") == true)
        let trailers = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
        let many = Array(repeating: "X-T: " + String(repeating: "t", count: 1000) + "\r\n", count: 90)
        #expect(Self.transcript([trailers] + many).last?.contains("trailer section") == true)
    }

    @Test("a read decoded whole leaves no storage held: the channel's receive buffer can be reused")
    func letsGoOfReads() throws {
        var decoder = HTTP1ResponseDecoder()
        decoder.expectResponse(toHEAD: false)
        var read = ByteBufferAllocator().buffer(capacity: 4096)
        read.writeString("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
        decoder.receive(read)
        var parts = 0
        while try decoder.next() != nil { parts += 1 }
        #expect(parts == 3)
        #expect(decoder.heldCapacity == 0)
    }

    @Test("a stream whose every read ends inside a chunk-size line holds only what is left of the last read")
    func leftoversStayBounded() throws {
        var decoder = HTTP1ResponseDecoder()
        decoder.expectResponse(toHEAD: false)
        decoder.receive(ByteBuffer(string: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4"))
        var parts: [ByteBuffer] = []  // kept, as the connection keeps parts until they are written
        var bodyBytes = 0
        for _ in 0..<5_000 {
            decoder.receive(ByteBuffer(string: "\r\nabcd\r\n4"))
            while let part = try decoder.next() {
                if case .body(let bytes) = part {
                    bodyBytes += bytes.readableBytes
                    parts.append(bytes)
                }
            }
            #expect(decoder.heldCapacity < 1024, "the decoder holds \(decoder.heldCapacity) bytes")
        }
        #expect(bodyBytes == 20_000)
        #expect(parts.count == 5_000)
    }

    @Test("what a close means: the end of a body delimited by it, a cut line, or nothing of the decoder's")
    func endOfInput() {
        func ending(_ input: String) -> HTTP1ResponseDecoder.Ending {
            var decoder = HTTP1ResponseDecoder()
            decoder.expectResponse(toHEAD: false)
            decoder.receive(ByteBuffer(string: input))
            while (try? decoder.next()) != nil {}
            return decoder.endOfInput()
        }
        #expect(ending("HTTP/1.1 200 OK\r\n\r\nabc") == .end)
        #expect(ending("HTTP/1.1 200 OK\r\nContent-") == .truncated)
        #expect(ending("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5") == .truncated)
        #expect(ending("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab") == .none)  // short: the state machine's to judge
        #expect(ending("") == .none)
        #expect(ending("\r\n") == .none)
    }

    @Test("nothing is read on an idle connection but empty lines, and nothing at all after a 101")
    func idleAndSwitched() throws {
        var idle = HTTP1ResponseDecoder()
        idle.receive(ByteBuffer(string: "\r\n\r"))
        #expect(try idle.next() == nil)
        idle.receive(ByteBuffer(string: "\nHTTP/1.1 200 OK\r\n\r\n"))
        #expect(throws: UpstreamError.self) { try idle.next() }

        let switched = Self.transcript(["HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nraw bytes, not HTTP"])
        #expect(switched == ["interim 101"])
    }

    @Test(
        "a head's fields are kept as the lines an HTTP/1.1 client gets: trimmed, in order, case kept; a field made elsewhere that HTTP/1.1 cannot carry makes its head unsendable"
    )
    func fieldLines() throws {
        var decoder = HTTP1ResponseDecoder()
        decoder.expectResponse(toHEAD: false)
        let text =
            "HTTP/1.1 200 OK\r\nContent-Type:text/plain \r\nX-Empty:\r\nconnection:  Keep-Alive\r\nX-Tab:\tv\r\nContent-Length: 0\r\n\r\n"
        decoder.receive(ByteBuffer(string: text))
        guard case .head(var head, _, let keepAlive) = try decoder.next() else {
            Issue.record("no head")
            return
        }
        #expect(keepAlive)
        #expect(head.contentLength == 0)
        #expect(
            String(decoding: head.fields.bytes, as: UTF8.self)
                == "Content-Type: text/plain\r\nX-Empty: \r\nconnection: Keep-Alive\r\nX-Tab: v\r\nContent-Length: 0\r\n")
        #expect(head.fields.count == 5)
        #expect(head.fields.first(name: "x-empty") == "")
        #expect(
            head.headers == ["Content-Type": "text/plain", "X-Empty": "", "connection": "Keep-Alive", "X-Tab": "v", "Content-Length": "0"])
        #expect(head.areSendable)
        // Said of the lines as of a request's made with `add`: they tell whoever reuses them.
        #expect(head.fields.hasFraming && !head.fields.listsClose && !head.fields.hasHost)
        head.headers.add(name: "X-Added", value: "a\r\nb")
        #expect(!head.areSendable)
        #expect(!head.headers.contains(name: "x-added"))
        let made = UpstreamResponseHead(status: 200, headers: ["X-Claim": "1\r\nX-Admin: yes"])
        #expect(!made.areSendable && made.fields.isEmpty)
        // Read as pairs and written back (as compression does), the head stays unsendable.
        var changed = made
        changed.headers.add(name: "Vary", value: "Accept-Encoding")
        #expect(!changed.areSendable && changed.fields.count == 1)
        #expect(UpstreamResponseHead(status: 200, headers: ["X-Claim": "1"]).areSendable)
    }
}
