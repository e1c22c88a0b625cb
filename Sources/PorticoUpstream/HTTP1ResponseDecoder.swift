import NIOCore
import NIOHTTP1
import PorticoHTTP

/// Reads a backend's HTTP/1.1 responses (RFC 9112) straight from its connection's bytes, for
/// ``UpstreamConnectionHandler``: the connection's only handler, in place of NIO's request encoder
/// and response decoder.
///
/// Why Portico has its own:
/// - **No handler between the socket and the connection.** With NIO's codec each request part and
///   each response part crossed one more pipeline context, boxed as `NIOAny` and unwrapped with a
///   dynamic cast: a few dozen reference counts per part, on every proxied request.
/// - **The request leaves as bytes.** NIO's response decoder learns that a request was `HEAD` by
///   watching `HTTPClientRequestPart` writes go by, which forces every request through
///   `HTTPRequestHead` and NIO's encoder. Here the connection says what it asked
///   (``expectResponse(toHEAD:)``), so ``UpstreamRequest/http1Head(for:)`` writes the head as bytes.
/// - **One reading of the framing.** The body is delimited by ``ResponseFraming``, the rules the
///   libcurl path and the exchange are judged by, read once from the fields as they are parsed,
///   rather than read by NIO's parser and checked again by Portico.
///
/// Strict where a lenient reading would let bytes of one response be taken for another: a bare CR,
/// a field line folded over two (obs-fold, which RFC 9112 §5.2 lets a gateway refuse), whitespace
/// before a field's colon, a field value with a control byte, a malformed chunk size, bytes after
/// the end of a response (a backend that sent more than it declared) and a head over
/// ``maxHeadBytes`` all fail the exchange (502). Lenient where RFC 9112 allows and old backends
/// rely on it: a bare LF ends a line (§2.2), empty lines before a status line are skipped, the
/// reason phrase may be missing (it is not forwarded; the gateway writes its own).
///
/// Chunked trailer fields are read past and dropped: nothing downstream of an HTTP/1.1 backend
/// forwards them (NIO's decoder delivered them, and the connection ignored them).
struct HTTP1ResponseDecoder {
    enum Part {
        /// An interim (1xx) head; the final head of the same response follows. After a `101`
        /// nothing more is read: what follows it is not HTTP.
        case interim(status: Int)
        /// The final head, how its body is delimited, and whether the backend allows the connection
        /// to be kept (HTTP/1.1 unless it says `Connection: close`; HTTP/1.0 only with
        /// `Connection: keep-alive`).
        case head(UpstreamResponseHead, ResponseFraming, keepAlive: Bool)
        case body(ByteBuffer)
        case end
    }

    /// What the end of the connection means to the response being read.
    enum Ending: Equatable {
        /// Nothing was being read, or the body was cut short (the connection's state machine
        /// judges that itself).
        case none
        /// The body was delimited by the close: the response is complete.
        case end
        /// The close came in the middle of a head, a chunk's size line or the trailers.
        case truncated
    }

    /// The longest head (status line and fields, with their line ends) and the longest trailer
    /// section taken, as NIO's decoder default (80 KiB).
    static let maxHeadBytes = 80 * 1024
    /// The longest chunk-size line (size and extensions) taken.
    static let maxChunkLineBytes = 4 * 1024

    private enum State {
        /// No request is outstanding: any byte but an empty line is one too many.
        case idle
        case head
        case fixedBody(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        /// The line end after a chunk's data.
        case chunkDataEnd
        case trailers
        case untilClose
        /// The body is complete: `.end` is next.
        case ending
        /// After a `101`, or an error: nothing more is read.
        case stopped
    }

    private var state = State.idle
    private var requestIsHEAD = false
    /// Bytes received and not decoded yet: those of an incomplete head or line, or of a read still
    /// being decoded.
    private var buffer = ByteBuffer()
    /// How far into `buffer` the end of an incomplete head or line has been searched for already,
    /// so a head arriving in many small reads is not scanned from its start each time.
    private var scanned = 0
    /// Bytes of the trailer section so far.
    private var trailerBytes = 0

    /// A response to a request just written is next; `toHEAD`: it was a `HEAD` request, whose
    /// answer has no body whatever its fields say.
    mutating func expectResponse(toHEAD: Bool) {
        requestIsHEAD = toHEAD
        if case .idle = state { state = .head }
    }

    /// Takes the bytes of one read. Decoding them is ``next()``'s.
    ///
    /// What is left of the last read (an incomplete head or line, at most the limits above) is
    /// moved to the front first: its storage may be shared with body parts already handed on,
    /// and appending to it as it is would copy, and keep, everything read before it. A stream
    /// whose every read ends inside a chunk-size line would then hold its whole body.
    mutating func receive(_ bytes: ByteBuffer) {
        if buffer.readableBytes == 0 {
            buffer = bytes
        } else {
            buffer.discardReadBytes()
            var bytes = bytes
            buffer.writeBuffer(&bytes)
        }
    }

    /// The storage the decoder holds between reads (for tests: it stays within the limits).
    var heldCapacity: Int { buffer.capacity }

    /// The next part from the bytes received so far; nil when more bytes are needed.
    /// - Throws: an ``UpstreamError`` (`.badResponse`) for bytes that are not a response, or not the
    ///   one expected; nothing more is decoded after it.
    ///
    /// Once everything received has been decoded, the decoder lets go of the read's storage (an
    /// empty buffer keeps it otherwise): the channel reuses its receive buffer for the next read
    /// only when nothing else holds it, and allocates a new one when something does.
    mutating func next() throws(UpstreamError) -> Part? {
        do {
            guard let part = try decode() else {
                if buffer.readableBytes == 0 { buffer = ByteBuffer() }
                return nil
            }
            return part
        } catch {
            state = .stopped
            buffer = ByteBuffer()
            throw error
        }
    }

    /// The connection closed: what that means to the response being read.
    mutating func endOfInput() -> Ending {
        defer { state = .stopped }
        switch state {
        case .untilClose:
            return .end
        case .head where buffer.readableBytes > 0 && !isOnlyLineEnds, .chunkSize, .chunkDataEnd, .trailers:
            return .truncated
        case .idle, .head, .fixedBody, .chunkData, .ending, .stopped:
            return .none
        }
    }

    // MARK: Decoding

    private mutating func decode() throws(UpstreamError) -> Part? {
        while true {
            switch state {
            case .idle:
                skipLineEnds()
                // A lone CR may be the first half of an empty line.
                guard buffer.readableBytes == 0 || isLoneCR else {
                    throw Self.invalid("the backend sent bytes after the end of its response")
                }
                return nil
            case .stopped:
                buffer.clear()
                return nil
            case .head:
                return try decodeHead()
            case .fixedBody(let remaining):
                guard let part = readBody(upTo: remaining) else { return nil }
                let left = remaining - part.readableBytes
                state = left == 0 ? .ending : .fixedBody(remaining: left)
                return .body(part)
            case .chunkData(let remaining):
                guard let part = readBody(upTo: remaining) else { return nil }
                let left = remaining - part.readableBytes
                state = left == 0 ? .chunkDataEnd : .chunkData(remaining: left)
                return .body(part)
            case .untilClose:
                guard let part = readBody(upTo: Int.max) else { return nil }
                return .body(part)
            case .chunkSize:
                guard let size = try readChunkSize() else { return nil }
                if size == 0 {
                    state = .trailers
                    trailerBytes = 0
                } else {
                    state = .chunkData(remaining: size)
                }
            case .chunkDataEnd:
                guard try readChunkDataEnd() else { return nil }
                state = .chunkSize
            case .trailers:
                guard let (length, total) = try peekLine(limit: Self.maxHeadBytes) else { return nil }
                buffer.moveReaderIndex(forwardBy: total)
                trailerBytes += length + 2
                guard trailerBytes <= Self.maxHeadBytes else {
                    throw Self.invalid("the trailer section is over \(Self.maxHeadBytes) bytes")
                }
                if length == 0 { state = .ending }
            case .ending:
                state = .idle
                return .end
            }
        }
    }

    /// Up to `limit` body bytes from what was received, as a slice of the read's buffer (no copy).
    private mutating func readBody(upTo limit: Int) -> ByteBuffer? {
        let length = min(limit, buffer.readableBytes)
        guard length > 0 else { return nil }
        return buffer.readSlice(length: length)
    }

    private var isLoneCR: Bool {
        buffer.readableBytes == 1 && buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) == UInt8(ascii: "\r")
    }

    private var isOnlyLineEnds: Bool {
        buffer.readableBytesView.allSatisfy { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }
    }

    /// Drops empty lines (CR LF, or a bare LF) at the front of the buffer; whether it dropped any.
    @discardableResult
    private mutating func skipLineEnds() -> Bool {
        let start = buffer.readerIndex
        while let byte = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) {
            if byte == UInt8(ascii: "\n") {
                buffer.moveReaderIndex(forwardBy: 1)
            } else if byte == UInt8(ascii: "\r"), buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self) == UInt8(ascii: "\n") {
                buffer.moveReaderIndex(forwardBy: 2)
            } else {
                break
            }
        }
        return buffer.readerIndex != start
    }

    /// The line end after a chunk's data: true once consumed, false while it is incomplete.
    private mutating func readChunkDataEnd() throws(UpstreamError) -> Bool {
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return false }
        if first == UInt8(ascii: "\n") {
            buffer.moveReaderIndex(forwardBy: 1)
            return true
        }
        guard first == UInt8(ascii: "\r") else { throw Self.invalid("a chunk's data is longer than its size") }
        guard let second = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self) else { return false }
        guard second == UInt8(ascii: "\n") else { throw Self.invalid("a chunk's data is longer than its size") }
        buffer.moveReaderIndex(forwardBy: 2)
        return true
    }

    /// The line at the front of the buffer, not consumed: its length without the line end, and
    /// with it; nil while the line is incomplete. A CR anywhere but before the LF is refused.
    private mutating func peekLine(limit: Int) throws(UpstreamError) -> (length: Int, total: Int)? {
        let view = buffer.readableBytesView
        guard let lf = view[(view.startIndex + scanned)...].firstIndex(of: UInt8(ascii: "\n")) else {
            scanned = view.count
            if view.count > limit + 2 { throw Self.invalid("a line is over \(limit) bytes") }
            return nil
        }
        scanned = 0
        var length = lf - view.startIndex
        if length > 0, view[lf - 1] == UInt8(ascii: "\r") { length -= 1 }
        guard length <= limit else { throw Self.invalid("a line is over \(limit) bytes") }
        guard !view[view.startIndex..<(view.startIndex + length)].contains(UInt8(ascii: "\r")) else {
            throw Self.invalid("a line holds a bare CR")
        }
        return (length, lf - view.startIndex + 1)
    }

    /// `chunk-size [ chunk-ext ] CRLF` (RFC 9112 §7.1): the size, or nil while the line is incomplete.
    private mutating func readChunkSize() throws(UpstreamError) -> Int? {
        guard let (length, total) = try peekLine(limit: Self.maxChunkLineBytes) else { return nil }
        defer { buffer.moveReaderIndex(forwardBy: total) }
        switch HTTP1Syntax.chunkSizeLine(buffer.readableBytesView.prefix(length), whitespaceBeforeExtensions: true) {
        case .size(let size): return size
        case .tooLong: throw Self.invalid("a chunk size has more than 15 digits")
        case .noSize: throw Self.invalid("a chunk size line holds no size")
        case .malformed: throw Self.invalid("a chunk size line is malformed")
        }
    }

    /// A whole head, or nil while it is incomplete.
    private mutating func decodeHead() throws(UpstreamError) -> Part? {
        if skipLineEnds() { scanned = 0 }
        guard let length = try findHeadEnd() else { return nil }
        let result = buffer.withUnsafeReadableBytes { bytes in
            Result { () throws(UpstreamError) in try Self.parseHead(UnsafeRawBufferPointer(rebasing: bytes[..<length])) }
        }
        let parsed = try result.get()
        buffer.moveReaderIndex(forwardBy: length)
        scanned = 0
        if parsed.status < 200 {
            // 1xx: the final head follows, unless it switched protocols.
            if parsed.status == 101 { state = .stopped }
            return .interim(status: parsed.status)
        }
        let framing: ResponseFraming
        switch parsed.framingFields.framing(status: parsed.status, requestIsHEAD: requestIsHEAD) {
        case .success(let value): framing = value
        case .failure(let error): throw error
        }
        switch framing.body {
        case .none, .length(0): state = .ending
        case .length(let length): state = .fixedBody(remaining: length)
        case .transferCoded: state = .chunkSize
        case .untilClose: state = .untilClose
        }
        let head = UpstreamResponseHead(status: parsed.status, fields: parsed.fields, contentLength: framing.contentLength)
        return .head(head, framing, keepAlive: parsed.keepAlive)
    }

    /// The length of the head at the front of the buffer, through the empty line that ends it; nil
    /// while that line has not arrived.
    private mutating func findHeadEnd() throws(UpstreamError) -> Int? {
        let resumeAt = scanned
        let found = buffer.withUnsafeReadableBytes { HTTP1Syntax.headEnd(in: $0, scanned: resumeAt) }
        if let found {
            guard found <= Self.maxHeadBytes else { throw Self.headTooLarge }
            return found
        }
        scanned = buffer.readableBytes
        guard scanned <= Self.maxHeadBytes else { throw Self.headTooLarge }
        return nil
    }

    private struct ParsedHead {
        var status: Int
        var fields: FieldLines
        var keepAlive: Bool
        /// The framing fields, read as the fields were parsed.
        var framingFields: ResponseFraming.FieldReader
    }

    /// Parses a whole head: `HTTP/1.x SP 3DIGIT [SP reason]`, then `name: value` lines.
    private static func parseHead(_ bytes: UnsafeRawBufferPointer) throws(UpstreamError) -> ParsedHead {
        var lines = HeadLines(bytes: bytes)
        guard let statusLine = try lines.next() else { throw invalid("the status line is missing") }
        let (minor, status) = try parseStatusLine(statusLine)
        // About as long as the head they come from: each line may gain a space and a CR, and the
        // status line is not among them.
        var fields = FieldLines(capacity: bytes.count)
        var closes = false
        var keepsAlive = false
        var framingFields = ResponseFraming.FieldReader()
        while let line = try lines.next(), !line.isEmpty {
            let name: UnsafeRawBufferPointer
            let value: UnsafeRawBufferPointer
            switch HTTP1Syntax.fieldLine(line) {
            case .field(let fieldName, let fieldValue): (name, value) = (fieldName, fieldValue)
            case .folded: throw invalid("a field line is folded (obs-fold)")
            case .noColon: throw invalid("a field line has no colon")
            case .invalidName: throw invalid("a field name is not a token")
            case .invalidValue: throw invalid("a field value holds a control byte")
            }
            // Names and values stay bytes: only the few fields read here become strings.
            switch name.count {
            case 10 where HeaderName.matches(bytes: name, "connection"):
                HTTP1Syntax.forEachElement(of: value) { option in
                    if HeaderName.matches(bytes: option, "close") { closes = true }
                    if HeaderName.matches(bytes: option, "keep-alive") { keepsAlive = true }
                }
            case 14 where HeaderName.matches(bytes: name, "content-length"),
                17 where HeaderName.matches(bytes: name, "transfer-encoding"):
                // An interim head's fields say nothing of the final one's framing.
                guard status >= 200 else { break }
                // Digits alone, as nearly every length is, are read as they are; a list, or
                // anything else, as a string.
                if name.count == 14, let length = DecimalDigits.value(of: value, maxDigits: 18) {
                    if let error = framingFields.read(contentLength: length) { throw error }
                    break
                }
                let error = framingFields.read(
                    name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
                if let error { throw error }
            default:
                break
            }
            // Checked as FieldLines checks what it is given: the name a token, no control byte in the value.
            fields.appendChecked(name: name, value: value, inLine: true)
        }
        // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing; it is
        // read, and the connection closed after it.
        let keepAlive = minor >= 1 ? !closes : (keepsAlive && !closes && !framingFields.hasTransferEncoding)
        return ParsedHead(status: status, fields: fields, keepAlive: keepAlive, framingFields: framingFields)
    }

    /// `HTTP/1.x SP 3DIGIT [SP reason-phrase]`: the minor version and the status code.
    private static func parseStatusLine(_ line: UnsafeRawBufferPointer) throws(UpstreamError) -> (minor: Int, status: Int) {
        guard line.count >= 12, line.starts(with: "HTTP/1.".utf8), line[8] == UInt8(ascii: " ") else {
            throw invalid("the status line is not HTTP/1.x")
        }
        let minor = Int(line[7] &- UInt8(ascii: "0"))
        guard minor < 10 else { throw invalid("the status line is not HTTP/1.x") }
        guard let status = DecimalDigits.value(of: line[9..<12], maxDigits: 3), status >= 100 else {
            throw invalid("the status code is not three digits from 100")
        }
        if line.count > 12 {
            guard line[12] == UInt8(ascii: " "), line[13...].allSatisfy(WireSyntax.isFieldValueByte) else {
                throw invalid("the reason phrase is malformed")
            }
        }
        return (minor, status)
    }

    static func invalid(_ reason: String) -> UpstreamError {
        UpstreamError(.badResponse, detail: "the backend's response is not valid HTTP/1.1: \(reason)")
    }

    static let headTooLarge = invalid("the head is over \(maxHeadBytes) bytes")
}

/// The lines of a whole head, each without its line end (CR LF or a bare LF).
private struct HeadLines {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    /// The next line; nil past the last. A CR that does not end a line is refused.
    mutating func next() throws(UpstreamError) -> UnsafeRawBufferPointer? {
        guard position < bytes.count else { return nil }
        var end = position
        while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
        let next = end + 1
        if end > position, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let line = UnsafeRawBufferPointer(rebasing: bytes[position..<end])
        position = next
        guard !line.contains(UInt8(ascii: "\r")) else { throw HTTP1ResponseDecoder.invalid("a line holds a bare CR") }
        return line
    }
}
