import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import PorticoRedis

@Suite("RESP codec")
struct RESPCodecTests {
    private func decodeAll(_ text: String) throws -> [RESPValue] {
        var buffer = ByteBuffer(string: text)
        var values: [RESPValue] = []
        while let value = try RESPValueDecoder().decodeOne(&buffer) { values.append(value) }
        #expect(buffer.readableBytes == 0, "bytes left over")
        return values
    }

    private func bulk(_ text: String) -> RESPValue { .bulkString(ByteBuffer(string: text)) }

    @Test("a command encoded straight to bytes is what encoding its value writes, and decodes back to it")
    func encodedCommand() throws {
        for parts in [["PING"], ["EVALSHA", "abc", "2", "portico:rl:key:é", "", "x\r\ny"], []] {
            var viaValue = ByteBuffer()
            RESPValueEncoder.write(.command(parts), to: &viaValue)
            let direct = RESPValueEncoder.command(parts)
            #expect(direct == viaValue, "\(parts)")
            #expect(try decodeAll(String(buffer: direct)) == [.command(parts)])
        }
        #expect(String(buffer: RESPValueEncoder.command(["GET", "k"])) == "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
    }

    @Test("every RESP2 reply type decodes")
    func everyType() throws {
        let values = try decodeAll(
            "+OK\r\n-ERR wrong\r\n:-42\r\n:0\r\n$3\r\nfoo\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n*2\r\n:1\r\n*1\r\n$2\r\nhi\r\n")
        #expect(
            values == [
                .simpleString("OK"), .error("ERR wrong"), .integer(-42), .integer(0), bulk("foo"), bulk(""), .bulkString(nil),
                .array(nil), .array([]), .array([.integer(1), .array([bulk("hi")])]),
            ])
    }

    @Test("a bulk string may hold CR LF and binary bytes")
    func binaryBulk() throws {
        #expect(try decodeAll("$4\r\n\r\n\0\u{7f}\r\n") == [bulk("\r\n\0\u{7f}")])
    }

    @Test("a reply split at every byte decodes once whole, and not before")
    func splitAnywhere() throws {
        let text = "*3\r\n$5\r\nhello\r\n:12345\r\n*2\r\n+OK\r\n$-1\r\n"
        let bytes = Array(text.utf8)
        let expected: RESPValue = .array([bulk("hello"), .integer(12345), .array([.simpleString("OK"), .bulkString(nil)])])
        for split in 1..<bytes.count {
            var buffer = ByteBuffer(bytes: bytes[..<split])
            let early = try RESPValueDecoder().decodeOne(&buffer)
            #expect(early == nil, "decoded early at \(split)")
            #expect(buffer.readableBytes == split, "consumed a partial reply")
            buffer.writeBytes(bytes[split...])
            let whole = try RESPValueDecoder().decodeOne(&buffer)
            #expect(whole == expected)
        }
    }

    @Test(
        "malformed replies are refused with a precise error",
        arguments: [
            ("?what\r\n", RESPDecodingError.unknownType(UInt8(ascii: "?"))),
            (":12a\r\n", .badInteger("12a")),
            (":\r\n", .badInteger("")),
            ("$-2\r\n", .badLength(-2)),
            ("*-5\r\n", .badLength(-5)),
            ("$3\r\nfooXY", .missingCRLF),
            ("+OK\rX", .lineTooLong(limit: 64 * 1024)),
            ("$99999999999\r\n", .tooLarge(99_999_999_999, limit: 1024 * 1024)),
            ("*99999999\r\n", .tooLarge(99_999_999, limit: 64 * 1024)),
            (":99999999999999999999\r\n", .badInteger("99999999999999999999")),
        ])
    func malformed(_ input: String, _ expected: RESPDecodingError) {
        var buffer = ByteBuffer(string: input)
        #expect(throws: expected) { try RESPValueDecoder().decodeOne(&buffer) }
    }

    @Test("a line without CR LF beyond the limit is refused rather than buffered")
    func unboundedLine() {
        var buffer = ByteBuffer(string: "+" + String(repeating: "a", count: 100))
        #expect(throws: RESPDecodingError.lineTooLong(limit: 16)) { try RESPValueDecoder(maxLineLength: 16).decodeOne(&buffer) }
    }

    @Test("arrays nested past the limit are refused")
    func tooDeep() {
        var buffer = ByteBuffer(string: String(repeating: "*1\r\n", count: 5) + ":1\r\n")
        #expect(throws: RESPDecodingError.tooDeep(limit: 3)) { try RESPValueDecoder(maxDepth: 3).decodeOne(&buffer) }
    }

    @Test("a bulk string longer than the limit is refused from its header, before its bytes arrive")
    func bulkTooLong() {
        var buffer = ByteBuffer(string: "$17\r\n")
        #expect(throws: RESPDecodingError.tooLarge(17, limit: 16)) { try RESPValueDecoder(maxBulkLength: 16).decodeOne(&buffer) }
        var fits = ByteBuffer(string: "$16\r\n0123456789abcdef\r\n")
        #expect(throws: Never.self) { try RESPValueDecoder(maxBulkLength: 16).decodeOne(&fits) }
    }

    @Test("an array with more elements than the limit is refused, at any depth")
    func arrayTooLong() throws {
        var top = ByteBuffer(string: "*5\r\n")
        #expect(throws: RESPDecodingError.tooLarge(5, limit: 4)) { try RESPValueDecoder(maxArrayLength: 4).decodeOne(&top) }
        var nested = ByteBuffer(string: "*1\r\n*5\r\n")
        #expect(throws: RESPDecodingError.tooLarge(5, limit: 4)) { try RESPValueDecoder(maxArrayLength: 4).decodeOne(&nested) }
        var fits = ByteBuffer(string: "*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n")
        #expect(try RESPValueDecoder(maxArrayLength: 4).decodeOne(&fits) == .array([.integer(1), .integer(2), .integer(3), .integer(4)]))
    }

    @Test("an incomplete reply holding more bytes than the buffer limit is refused; a whole one of that size is not")
    func bufferedTooMuch() throws {
        let decoder = RESPValueDecoder(maxBufferedBytes: 64)
        // Many small elements, each within every other limit, adding up past the buffer's.
        var incomplete = ByteBuffer(string: "*100\r\n" + String(repeating: ":1\r\n", count: 20))
        #expect(throws: RESPDecodingError.tooMuchBuffered(86, limit: 64)) { try decoder.decodeBuffered(&incomplete) }
        var small = ByteBuffer(string: "*100\r\n:1\r\n")
        #expect(try decoder.decodeBuffered(&small) == nil, "under the limit, it waits for more")
        // Whole replies are consumed as they decode: a batch larger than the limit is fine.
        var batch = ByteBuffer(string: String(repeating: "+OK\r\n", count: 40))
        var count = 0
        while try decoder.decodeBuffered(&batch) != nil { count += 1 }
        #expect(count == 40)
    }

    @Test(
        "a reply over a limit, in the pipeline, fails the waiting commands and closes the connection",
        arguments: [
            ("$2000000\r\n", "length 2000000 exceeds the limit of 1048576"),
            ("*100000\r\n", "length 100000 exceeds the limit of 65536"),
            (String(repeating: "*1\r\n", count: 9) + ":1\r\n", "arrays nested deeper than 8"),
            ("{buffered}", "an incomplete reply of 2097178 bytes exceeds the buffer limit of 2097152"),
        ])
    func limitClosesConnection(_ input: String, _ detail: String) throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers(
            ByteToMessageHandler(RESPValueDecoder()), RedisCommandHandler())
        let promise = channel.embeddedEventLoop.makePromise(of: RESPValue.self)
        let result = NIOLockedValueBox<Result<RESPValue, any Error>?>(nil)
        promise.futureResult.whenComplete { outcome in result.withLockedValue { $0 = outcome } }
        try channel.writeOutbound(RedisCommand(.command(["GET", "k"]), promise: promise))
        // Two bulk strings each within the limit, the second not yet whole: 2 MiB and 26 bytes held.
        let megabyte = String(repeating: "x", count: 1_048_576)
        let bytes = input == "{buffered}" ? "*3\r\n$1048576\r\n\(megabyte)\r\n$1048576\r\n\(megabyte)" : input
        _ = try? channel.writeInbound(ByteBuffer(string: bytes))
        let outcome = try #require(result.withLockedValue { $0 }, "the command is still waiting")
        #expect(throws: RedisError.protocolViolation(detail)) { try outcome.get() }
        #expect(!channel.isActive)
    }

    @Test("what the encoder writes, the decoder reads back")
    func roundTrip() throws {
        let values: [RESPValue] = [
            .simpleString("PONG"), .error("NOSCRIPT x"), .integer(.min + 1), .integer(.max), bulk("a\r\nb"), .bulkString(nil), .array(nil),
            .array([]), .command(["EVALSHA", "abc", "1", "key"]), .array([.array([.integer(1)]), bulk("x")]),
        ]
        var buffer = ByteBuffer()
        for value in values { RESPValueEncoder.write(value, to: &buffer) }
        var decoded: [RESPValue] = []
        while let value = try RESPValueDecoder().decodeOne(&buffer) { decoded.append(value) }
        #expect(decoded == values)
    }

    @Test("a command is an array of bulk strings")
    func commandBytes() {
        var buffer = ByteBuffer()
        RESPValueEncoder.write(.command(["SET", "k", "v"]), to: &buffer)
        #expect(String(buffer: buffer) == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
    }

    @Test("replies complete their commands in order; a malformed reply fails the rest and closes")
    func handlerOrderAndFailure() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers(
            ByteToMessageHandler(RESPValueDecoder()), RedisCommandHandler())
        let loop = channel.embeddedEventLoop
        let promises = (0..<3).map { _ in loop.makePromise(of: RESPValue.self) }
        for (index, promise) in promises.enumerated() {
            try channel.writeOutbound(RedisCommand(.command(["GET", "k\(index)"]), promise: promise))
        }
        // Filled in by the futures' callbacks; the embedded loop runs them on this thread, at once.
        let box = NIOLockedValueBox<[Result<RESPValue, any Error>]>(Array(repeating: .failure(RedisError.timeout), count: 3))
        for (index, promise) in promises.enumerated() {
            promise.futureResult.whenComplete { result in box.withLockedValue { $0[index] = result } }
        }
        var results: [Result<RESPValue, any Error>] { box.withLockedValue { $0 } }
        // The first reply arrives split in two reads.
        try channel.writeInbound(ByteBuffer(string: "$1\r"))
        #expect(throws: RedisError.timeout) { try results[0].get() }
        try channel.writeInbound(ByteBuffer(string: "\nA\r\n-ERR no\r\n"))
        #expect(try results[0].get() == bulk("A"))
        #expect(try results[1].get() == .error("ERR no"))
        // The decoder's error reaches the handler, which fails what waits and closes.
        _ = try? channel.writeInbound(ByteBuffer(string: "!bogus\r\n"))
        #expect(throws: RedisError.protocolViolation("unknown RESP2 type byte 0x21")) { try results[2].get() }
        #expect(!channel.isActive)
    }
}
