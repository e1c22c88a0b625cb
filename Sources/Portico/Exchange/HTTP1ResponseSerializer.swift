import NIOCore
import NIOHTTP1
import PorticoHTTP

/// Writes an HTTP/1.1 connection's responses as the bytes that go to the client: the gateway
/// handler's own encoder, in place of NIO's `HTTPResponseEncoder` handler.
///
/// Why not NIO's: that encoder is one more handler on the connection, so each response part
/// crossed one more pipeline context, boxed in a `NIOAny` and unwrapped by a dynamic cast, and
/// its framing rewrote the head's `HTTPHeaders` (a copy when they were shared) before writing
/// them out. Here the gateway handler, which knows the request each head answers, writes the
/// bytes itself and hands them to the connection below as they are.
///
/// The framing is NIO's, so that clients see what they saw before:
/// - a status without a body (1xx, 204, 304), and a response to `CONNECT`, loses its
///   `Content-Length` and `Transfer-Encoding` fields;
/// - otherwise a `Content-Length` frames the body (a `Transfer-Encoding` beside it is dropped);
///   without one, an HTTP/1.1 response is chunked (any `Transfer-Encoding` of its own replaced by
///   `chunked`), an HTTP/1.0 one ends with the connection;
/// - a response to `HEAD` keeps the fields that describe the body a `GET` would have had, and
///   nothing after the head is written: neither the body nor a chunked ending.
///
/// The fields themselves were checked where they came from (``Exchange/refusal(of:)``, a
/// problem's own fields): this writes them as they are.
struct HTTP1ResponseSerializer {
    /// The body of the response under way is chunked on the wire.
    private var chunked = false
    /// The response under way answers `HEAD` (or `CONNECT`): nothing follows its head.
    private var bodySuppressed = false

    /// A body this short is copied next to its framing (or its head) and written as one buffer; a
    /// longer one is written as it is, beside its framing, rather than copied.
    static let copiedBodyLimit = 4096

    /// The bytes every chunked response shares, made once: written as they are, never changed, so
    /// no response allocates its own.
    private static let lineEnd = ByteBuffer(staticString: "\r\n")
    private static let lastChunk = ByteBuffer(staticString: "0\r\n\r\n")

    /// What a body part becomes on the wire.
    enum BodyBytes {
        /// Nothing: the response has no body (it answers `HEAD`), or the part is empty.
        case none
        case one(ByteBuffer)
        /// A chunk too long to copy: its size line, its data, then the line end that closes it.
        case chunk(ByteBuffer, ByteBuffer, ByteBuffer)
    }

    /// The bytes of `head`, which answers a request with `method` (nil when the bytes received
    /// never made a request: a refusal), with room after them for a short body.
    mutating func head(_ head: HTTPResponseHead, answering method: HTTPMethod?) -> ByteBuffer {
        var fields = beginHead(version: head.version, status: head.status, answering: method, fieldCount: head.headers.count)
        for (name, value) in head.headers { fields.add(name: name, value: value) }
        return endHead(&fields)
    }

    /// A head's fields being written, after its status line: ``add(name:value:)`` applies the
    /// framing rules to each (a field that frames the body otherwise is left out), and
    /// ``HTTP1ResponseSerializer/endHead(_:)`` ends them.
    struct HeadFields: ResponseFields {
        fileprivate var buffer: ByteBuffer
        fileprivate let hasBody: Bool
        /// HTTP/1.1 or later: a body without a length is chunked (an HTTP/1.0 one ends with the connection).
        fileprivate let chunksWithoutLength: Bool
        fileprivate var hasLength = false

        mutating func add(name: String, value: String) {
            switch name.utf8.count {
            case 14 where HeaderName.matches(name, "content-length"):
                guard hasBody else { return }
                hasLength = true
            case 17 where HeaderName.matches(name, "transfer-encoding"):
                // Dropped beside a length, replaced by `chunked` without one, dropped without a body.
                return
            default:
                break
            }
            HTTP1ResponseSerializer.writeField(name: name, value: value, to: &buffer)
        }

        /// A whole field line, through its CR LF, written as it is: one that is not a framing
        /// field (the caller has left `Content-Length` and `Transfer-Encoding` out).
        mutating func add(line: UnsafeRawBufferPointer) {
            buffer.writeBytes(line)
        }

        /// `Content-Length: length`, without making a string of it.
        mutating func addContentLength(_ length: Int) {
            guard hasBody else { return }
            hasLength = true
            buffer.writeStaticString("Content-Length: ")
            HTTP1ResponseSerializer.writeDecimal(length, to: &buffer)
            buffer.writeStaticString("\r\n")
        }
    }

    /// Starts a head: its status line, then the fields added to what this returns.
    /// - Parameters:
    ///   - fieldBytes: the bytes of fields known already (lines to be copied), reserved as they are;
    ///   - fieldCount: how many more fields, reserved at a usual field's length each.
    mutating func beginHead(
        version: HTTPVersion, status: HTTPResponseStatus, answering method: HTTPMethod?, fieldBytes: Int = 0, fieldCount: Int
    ) -> HeadFields {
        let code = status.code
        if !(code >= 100 && code < 200 && code != 101) {
            // A final answer: what it answers decides whether a body follows. An interim one
            // (`100 Continue`) is followed by the final one, to the same request.
            bodySuppressed = method == .HEAD || method == .CONNECT
        }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(256 + fieldBytes + fieldCount * 48)
        Self.writeStatusLine(version: version, code: code, reason: status.reasonPhrase, to: &buffer)
        let hasBody = method != .CONNECT && status.mayHaveResponseBody
        return HeadFields(buffer: buffer, hasBody: hasBody, chunksWithoutLength: version.major == 1 && version.minor >= 1)
    }

    /// Ends a head begun with ``beginHead(version:status:answering:fieldCount:)``: an HTTP/1.1
    /// body of unknown length is chunked.
    /// Written in place (`fields` is the caller's last use of them): the bytes are not copied.
    mutating func endHead(_ fields: inout HeadFields) -> ByteBuffer {
        let chunkedOnWire = fields.hasBody && !fields.hasLength && fields.chunksWithoutLength
        if chunkedOnWire { fields.buffer.writeStaticString("transfer-encoding: chunked\r\n") }
        fields.buffer.writeStaticString("\r\n")
        chunked = chunkedOnWire && !bodySuppressed
        return fields.buffer
    }

    /// Appends `body`, framed, to `buffer` (a head just written) when it is short enough to copy;
    /// false when it is not, and it is to be written by ``body(_:)`` after `buffer`.
    mutating func append(body: ByteBuffer, to buffer: inout ByteBuffer) -> Bool {
        guard !bodySuppressed, body.readableBytes > 0 else { return true }
        guard body.readableBytes <= Self.copiedBodyLimit else { return false }
        if chunked { Self.writeChunkSize(body.readableBytes, to: &buffer) }
        var body = body
        buffer.writeBuffer(&body)
        if chunked { buffer.writeStaticString("\r\n") }
        return true
    }

    /// A body part's bytes on the wire.
    mutating func body(_ body: ByteBuffer) -> BodyBytes {
        guard !bodySuppressed, body.readableBytes > 0 else { return .none }
        guard chunked else { return .one(body) }
        if body.readableBytes <= Self.copiedBodyLimit {
            var framed = ByteBuffer()
            framed.reserveCapacity(body.readableBytes + 12)
            _ = append(body: body, to: &framed)
            return .one(framed)
        }
        var size = ByteBuffer()
        size.reserveCapacity(12)
        Self.writeChunkSize(body.readableBytes, to: &size)
        return .chunk(size, body, Self.lineEnd)
    }

    /// The bytes that end the response: a chunked body's last chunk and trailers; nil when there
    /// is nothing to write (the body's length or the connection's close delimits it).
    mutating func end(_ trailers: HTTPHeaders?) -> ByteBuffer? {
        defer {
            chunked = false
            bodySuppressed = false
        }
        guard chunked else { return nil }
        guard let trailers, !trailers.isEmpty else { return Self.lastChunk }
        var buffer = ByteBuffer()
        buffer.reserveCapacity(64 + trailers.count * 48)
        buffer.writeStaticString("0\r\n")
        for (name, value) in trailers { Self.writeField(name: name, value: value, to: &buffer) }
        buffer.writeStaticString("\r\n")
        return buffer
    }

    private static func writeStatusLine(version: HTTPVersion, code: UInt, reason: String, to buffer: inout ByteBuffer) {
        switch (version.major, version.minor) {
        case (1, 1): buffer.writeStaticString("HTTP/1.1 ")
        case (1, 0): buffer.writeStaticString("HTTP/1.0 ")
        default:
            buffer.writeStaticString("HTTP/")
            buffer.writeString(String(version.major))
            buffer.writeStaticString(".")
            buffer.writeString(String(version.minor))
            buffer.writeStaticString(" ")
        }
        writeDecimal(Int(code), to: &buffer)
        buffer.writeStaticString(" ")
        buffer.writeString(reason)
        buffer.writeStaticString("\r\n")
    }

    /// One field line: `name: value` and its line end.
    fileprivate static func writeField(name: String, value: String, to buffer: inout ByteBuffer) {
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        buffer.writeString(value)
        buffer.writeStaticString("\r\n")
    }

    /// `value` (not negative) in decimal: its digits made on the stack, then written in one piece
    /// (a write per digit checked the buffer's room and ownership each time).
    fileprivate static func writeDecimal(_ value: Int, to buffer: inout ByteBuffer) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = value
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            buffer.writeBytes(UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// A chunk's size line: the size in hexadecimal, lower case as NIO wrote it, and its line end.
    private static func writeChunkSize(_ size: Int, to buffer: inout ByteBuffer) {
        var shift = (Int.bitWidth - size.leadingZeroBitCount + 3) / 4 * 4 - 4
        shift = max(shift, 0)
        while shift >= 0 {
            let digit = UInt8((size >> shift) & 0xF)
            buffer.writeInteger(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
            shift -= 4
        }
        buffer.writeStaticString("\r\n")
    }
}
