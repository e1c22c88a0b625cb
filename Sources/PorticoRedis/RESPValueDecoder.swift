import NIOCore

/// Decodes RESP2 replies as they arrive, split anywhere across reads.
///
/// A reply is parsed from the start of the buffer each time bytes arrive and consumed only when
/// whole, so a split reply costs a re-parse of its head; the replies this client reads (a few
/// integers) are short. Sizes are bounded so that a broken or hostile server cannot make the
/// gateway buffer without end: lines, bulk strings, array lengths, nesting, and the bytes of a
/// reply still incomplete. Every violation is a ``RESPDecodingError``, which makes the
/// ``RedisCommandHandler`` fail what waits and close the connection.
///
/// The defaults fit what the gateway reads (the fleet script's reply is a few dozen integers) with
/// a wide margin, and keep a misbehaving server's cost to a few megabytes per connection.
public struct RESPValueDecoder: ByteToMessageDecoder {
    public typealias InboundOut = RESPValue

    public let maxLineLength: Int
    public let maxBulkLength: Int
    public let maxArrayLength: Int
    public let maxDepth: Int
    /// Most bytes held while waiting for the rest of a reply.
    public let maxBufferedBytes: Int

    public init(
        maxLineLength: Int = 64 * 1024, maxBulkLength: Int = 1024 * 1024, maxArrayLength: Int = 64 * 1024, maxDepth: Int = 8,
        maxBufferedBytes: Int = 2 * 1024 * 1024
    ) {
        self.maxLineLength = maxLineLength
        self.maxBulkLength = maxBulkLength
        self.maxArrayLength = maxArrayLength
        self.maxDepth = maxDepth
        self.maxBufferedBytes = maxBufferedBytes
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let value = try decodeBuffered(&buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(value))
        return .continue
    }

    /// ``decodeOne(_:)``, refusing an incomplete reply that already holds more than
    /// ``maxBufferedBytes``.
    public func decodeBuffered(_ buffer: inout ByteBuffer) throws -> RESPValue? {
        guard let value = try decodeOne(&buffer) else {
            guard buffer.readableBytes <= maxBufferedBytes else {
                throw RESPDecodingError.tooMuchBuffered(buffer.readableBytes, limit: maxBufferedBytes)
            }
            return nil
        }
        return value
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A partial reply at the end of the stream is dropped: the commands waiting on it fail
        // when the channel closes.
        try decode(context: context, buffer: &buffer)
    }

    /// One whole value from the front of `buffer`, consumed; `nil` (nothing consumed) while
    /// incomplete.
    public func decodeOne(_ buffer: inout ByteBuffer) throws -> RESPValue? {
        var cursor = buffer.readerIndex
        guard let value = try parse(buffer, at: &cursor, depth: 0) else { return nil }
        buffer.moveReaderIndex(to: cursor)
        return value
    }

    private func parse(_ buffer: ByteBuffer, at cursor: inout Int, depth: Int) throws -> RESPValue? {
        guard let type = buffer.getInteger(at: cursor, as: UInt8.self) else { return nil }
        var position = cursor + 1
        guard let line = try self.line(buffer, at: &position) else { return nil }
        switch type {
        case UInt8(ascii: "+"):
            cursor = position
            return .simpleString(String(decoding: line, as: UTF8.self))
        case UInt8(ascii: "-"):
            cursor = position
            return .error(String(decoding: line, as: UTF8.self))
        case UInt8(ascii: ":"):
            cursor = position
            return .integer(try Self.integer(line))
        case UInt8(ascii: "$"):
            let length = try Self.integer(line)
            if length == -1 {
                cursor = position
                return .bulkString(nil)
            }
            guard length >= 0 else { throw RESPDecodingError.badLength(length) }
            guard length <= maxBulkLength else { throw RESPDecodingError.tooLarge(length, limit: maxBulkLength) }
            let count = Int(length)
            guard buffer.writerIndex - position >= count + 2 else { return nil }
            guard buffer.getInteger(at: position + count, as: UInt16.self) == Self.crlf else {
                throw RESPDecodingError.missingCRLF
            }
            let bytes = buffer.getSlice(at: position, length: count)!
            cursor = position + count + 2
            return .bulkString(bytes)
        case UInt8(ascii: "*"):
            let length = try Self.integer(line)
            if length == -1 {
                cursor = position
                return .array(nil)
            }
            guard length >= 0 else { throw RESPDecodingError.badLength(length) }
            guard length <= maxArrayLength else { throw RESPDecodingError.tooLarge(length, limit: maxArrayLength) }
            guard depth < maxDepth else { throw RESPDecodingError.tooDeep(limit: maxDepth) }
            var elements: [RESPValue] = []
            elements.reserveCapacity(Int(min(length, 64)))
            for _ in 0..<length {
                guard let element = try parse(buffer, at: &position, depth: depth + 1) else { return nil }
                elements.append(element)
            }
            cursor = position
            return .array(elements)
        default:
            throw RESPDecodingError.unknownType(type)
        }
    }

    private static let crlf = UInt16(0x0D0A)

    /// The bytes up to the next CR LF, moving `position` past it; `nil` while it has not arrived.
    private func line(_ buffer: ByteBuffer, at position: inout Int) throws -> ByteBufferView? {
        let available = buffer.writerIndex - position
        let view = buffer.viewBytes(at: position, length: min(available, maxLineLength + 2))!
        guard let cr = view.firstIndex(of: UInt8(ascii: "\r")) else {
            if available > maxLineLength + 1 { throw RESPDecodingError.lineTooLong(limit: maxLineLength) }
            return nil
        }
        guard cr + 1 < buffer.writerIndex else { return nil }
        guard buffer.getInteger(at: cr + 1, as: UInt8.self) == UInt8(ascii: "\n") else {
            throw RESPDecodingError.lineTooLong(limit: maxLineLength)
        }
        let line = buffer.viewBytes(at: position, length: cr - position)!
        position = cr + 2
        return line
    }

    private static func integer(_ bytes: ByteBufferView) throws -> Int64 {
        var value: Int64 = 0
        var negative = false
        var digits = 0
        for (offset, byte) in bytes.enumerated() {
            if offset == 0, byte == UInt8(ascii: "-") {
                negative = true
                continue
            }
            let (times10, overflow) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowAgain) = times10.addingReportingOverflow(Int64(byte &- UInt8(ascii: "0")))
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), !overflow, !overflowAgain else {
                throw RESPDecodingError.badInteger(String(decoding: bytes, as: UTF8.self))
            }
            value = next
            digits += 1
        }
        guard digits > 0 else { throw RESPDecodingError.badInteger(String(decoding: bytes, as: UTF8.self)) }
        return negative ? -value : value
    }
}
