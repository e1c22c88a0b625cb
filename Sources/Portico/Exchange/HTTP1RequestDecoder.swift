import NIOCore
import NIOHTTP1
import PorticoHTTP

/// Reads a client's HTTP/1.1 requests (RFC 9112) straight from its connection's bytes, for
/// ``GatewayHandler``, in place of NIO's `HTTPRequestDecoder` in a `ByteToMessageHandler`.
///
/// Why Portico has its own:
/// - **No handler between the socket and the gateway.** With NIO's decoder every read crossed one
///   more pipeline context, and every part it produced was boxed in a `NIOAny` and unwrapped with a
///   dynamic cast: a few dozen reference counts per request.
/// - **One reading of the framing.** The body's delimitation is read once, from the fields as they
///   are parsed, by the rules below; llhttp's reading was checked again by ``RequestFraming``.
///
/// It produces the parts NIO's decoder did (``HTTPServerRequestPart``), and refuses with
/// NIO's errors (``HTTPParserError``), so that the ``ExchangeStateMachine``, the pipelining queue
/// and ``Problem/parserError(_:maxHeadBytes:maxHeaderCount:)`` read it as they read NIO's.
///
/// What it takes and refuses follows llhttp's strict reading (NIO's), which a differential test
/// and a fuzz target compare it with, with these deliberate differences:
/// - **Any token is a method** (RFC 9110 §9.1): an extension method reaches the routes, which
///   say what they allow, rather than being refused for not being on llhttp's list.
/// - **The head limit counts the head as sent**, request line and line ends included, where NIO
///   counted the target's, names' and values' bytes: a few bytes a field stricter, and one number
///   for an operator to reason about.
///
/// Strict where a lenient reading would let the bytes of one request be taken for another: every
/// line ends in CR LF (a bare LF or CR is refused), a field line may not be folded (obs-fold),
/// nor have whitespace before its colon, nor a control byte in its value; `Content-Length` is one
/// field of digits, and never beside `Transfer-Encoding`, whose final coding must be `chunked`;
/// a chunk's size is hexadecimal digits and its data ends in CR LF. After a request that does not
/// keep the connection alive, anything but empty lines is refused (`closedConnection`), and after
/// one that asks to switch protocols (a `CONNECT`, or `Upgrade` with `Connection: upgrade`)
/// nothing more is read: the bytes wait (``takeUnread()``) for whatever takes the connection over.
struct HTTP1RequestDecoder {
    /// The longest head (request line and fields, with their line ends), and the longest trailer
    /// section; the policy's `maxHeadBytes`.
    let maxHeadBytes: Int
    /// The most fields in a head, and in a trailer section; the policy's `maxHeaderCount`.
    let maxFieldCount: Int
    /// The longest chunk-size line (size and extensions) taken.
    static let maxChunkLineBytes = 4 * 1024

    private enum State {
        /// Between requests, or inside a head.
        case head
        case fixedBody(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        /// The CR LF after a chunk's data.
        case chunkDataEnd
        case trailers
        /// The request is complete: `.end` is next.
        case ending
        /// After a request that closes the connection: only empty lines may follow.
        case closed
        /// After a request that switched protocols: nothing more is read as HTTP, and what arrives
        /// is kept for whatever takes the connection over (``takeUnread()``).
        case switched
        /// After an error, or the end of input: nothing more is read or kept.
        case stopped
    }

    private var state = State.head
    /// Bytes received and not decoded yet.
    private var buffer = ByteBuffer()
    /// How far into `buffer` the end of an incomplete head has been searched for already, so that a
    /// head arriving in many small reads is not scanned from its start each time.
    private var scanned = 0
    /// Whether the current head's request line has been checked (it is, as soon as it is whole, so
    /// that a connection that is not HTTP at all is refused at its first line).
    private var requestLineChecked = false
    /// The request line's method has ended (its space has arrived) and was a token.
    private var methodEnded = false
    /// What comes after the current request's `.end`: another request, a close, or another protocol.
    private var afterEnd = State.head
    private var trailers: HTTPHeaders?
    private var trailerBytes = 0

    init(maxHeadBytes: Int, maxFieldCount: Int) {
        self.maxHeadBytes = maxHeadBytes
        self.maxFieldCount = maxFieldCount
    }

    /// Takes the bytes of one read. Decoding them is ``next()``'s.
    ///
    /// What is left of the last read (an incomplete head or line) is moved to the front first: its
    /// storage may be shared with body parts already handed on, and appending to it as it is would
    /// copy, and keep, everything read before it.
    ///
    /// After a refusal nothing more is kept: the connection closes once the refusal is answered,
    /// which may wait behind a response still under way, and a client must not be able to fill the
    /// gateway's memory meanwhile.
    mutating func receive(_ bytes: ByteBuffer) {
        if case .stopped = state { return }
        if buffer.readableBytes == 0 {
            buffer = bytes
        } else {
            buffer.discardReadBytes()
            var bytes = bytes
            buffer.writeBuffer(&bytes)
        }
    }

    /// The storage the decoder holds between reads (for tests: none once a read is decoded whole).
    var heldCapacity: Int { buffer.capacity }

    /// The next part from the bytes received so far; nil when more bytes are needed, or when
    /// nothing more is read (after a switch of protocols or an error).
    /// - Throws: the ``HTTPParserError`` NIO's decoder would name; nothing more is decoded after it.
    ///
    /// Once everything received has been decoded, the decoder lets go of the read's storage (an
    /// empty buffer keeps it otherwise): the channel reuses its receive buffer for the next read
    /// only when nothing else holds it, and allocates a new one when something does.
    mutating func next() throws(HTTPParserError) -> HTTPServerRequestPart? {
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

    /// The connection's input ended: the error a request cut short is (`invalidEOFState`), or nil
    /// when it ended between requests.
    mutating func endOfInput() -> HTTPParserError? {
        switch state {
        case .head where buffer.readableBytesView.contains(where: { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }),
            .fixedBody, .chunkSize, .chunkData, .chunkDataEnd, .trailers:
            state = .stopped
            return .invalidEOFState
        case .head, .ending, .closed:
            state = .stopped
            return nil
        case .switched, .stopped:
            return nil
        }
    }

    /// A request that switches protocols has ended: nothing more is read as HTTP, and the
    /// connection should not be read until whatever takes it over is in place (or it closes).
    var switchedProtocols: Bool {
        if case .switched = state { true } else { false }
    }

    /// After a request that switched protocols, what the client sent past it, for the handler that
    /// carries the new protocol; nil otherwise (what an unfinished request left is nobody's).
    mutating func takeUnread() -> ByteBuffer? {
        guard case .switched = state, buffer.readableBytes > 0 else { return nil }
        defer { buffer = ByteBuffer() }
        return buffer
    }

    // MARK: Decoding

    private mutating func decode() throws(HTTPParserError) -> HTTPServerRequestPart? {
        while true {
            switch state {
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
            case .chunkSize:
                guard let size = try readChunkSize() else { return nil }
                if size == 0 {
                    state = .trailers
                    trailerBytes = 0
                } else {
                    state = .chunkData(remaining: size)
                }
            case .chunkDataEnd:
                guard buffer.readableBytes >= 2 else { return nil }
                guard buffer.readableBytesView.starts(with: Self.lineEnd) else { throw .invalidChunkSize }
                buffer.moveReaderIndex(forwardBy: 2)
                state = .chunkSize
            case .trailers:
                guard try readTrailerLine() else { return nil }
            case .ending:
                state = afterEnd
                afterEnd = .head
                let ended = trailers
                trailers = nil
                return .end(ended)
            case .closed:
                skipLineEnds()
                guard buffer.readableBytes == 0 || (buffer.readableBytes == 1 && buffer.readableBytesView.first == UInt8(ascii: "\r"))
                else {
                    throw .closedConnection
                }
                return nil
            case .switched, .stopped:
                return nil
            }
        }
    }

    private static let lineEnd: [UInt8] = [UInt8(ascii: "\r"), UInt8(ascii: "\n")]

    /// Up to `limit` body bytes from what was received, as a slice of the read's buffer (no copy).
    private mutating func readBody(upTo limit: Int) -> ByteBuffer? {
        let length = min(limit, buffer.readableBytes)
        guard length > 0 else { return nil }
        return buffer.readSlice(length: length)
    }

    /// Drops empty lines (CR LF, or a bare LF, as llhttp does) before a request.
    private mutating func skipLineEnds() {
        let view = buffer.readableBytesView
        var index = view.startIndex
        while index < view.endIndex {
            if view[index] == UInt8(ascii: "\n") {
                index += 1
            } else if view[index] == UInt8(ascii: "\r"), index + 1 < view.endIndex, view[index + 1] == UInt8(ascii: "\n") {
                index += 2
            } else {
                break
            }
        }
        buffer.moveReaderIndex(forwardBy: index - view.startIndex)
    }

    /// The line at the front of the buffer, not consumed: its length without its CR LF; nil while
    /// it is incomplete.
    /// The search resumes where the last one stopped (``scanned``), so that a line arriving a byte
    /// a read is not searched from its start each time.
    private mutating func peekLine(limit: Int, error: HTTPParserError) throws(HTTPParserError) -> Int? {
        let view = buffer.readableBytesView
        guard let lf = view[(view.startIndex + scanned)...].firstIndex(of: UInt8(ascii: "\n")) else {
            scanned = view.count
            if view.count > limit + 1 { throw error }
            return nil
        }
        scanned = 0
        let length = lf - view.startIndex - 1
        guard length >= 0, view[lf - 1] == UInt8(ascii: "\r") else { throw .lfExpected }
        guard length <= limit else { throw error }
        return length
    }

    /// `chunk-size [ chunk-ext ] CRLF` (RFC 9112 §7.1): the size, or nil while the line is incomplete.
    private mutating func readChunkSize() throws(HTTPParserError) -> Int? {
        guard let length = try peekLine(limit: Self.maxChunkLineBytes, error: .invalidChunkSize) else { return nil }
        // No whitespace before extensions, as llhttp: see HTTP1Syntax.chunkSizeLine.
        guard case .size(let size) = HTTP1Syntax.chunkSizeLine(buffer.readableBytesView.prefix(length), whitespaceBeforeExtensions: false)
        else { throw .invalidChunkSize }
        buffer.moveReaderIndex(forwardBy: length + 2)
        return size
    }

    /// One line of the trailer section: true once consumed, false while it is incomplete. The
    /// trailers are handed on with `.end`, as NIO's decoder did; they count against the head's limits.
    private mutating func readTrailerLine() throws(HTTPParserError) -> Bool {
        guard let length = try peekLine(limit: maxHeadBytes, error: .headerOverflow) else { return false }
        trailerBytes += length + 2
        guard trailerBytes <= maxHeadBytes else { throw .headerOverflow }
        if length == 0 {
            buffer.moveReaderIndex(forwardBy: 2)
            state = .ending
            return true
        }
        let field = try readable(length, Self.field)
        buffer.moveReaderIndex(forwardBy: length + 2)
        if trailers == nil { trailers = HTTPHeaders() }
        guard trailers!.count < maxFieldCount else { throw .headerOverflow }
        trailers!.add(name: field.name, value: field.value)
        return true
    }

    /// `body` over the first `length` readable bytes, in place.
    private func readable<T>(
        _ length: Int, _ body: (UnsafeRawBufferPointer) throws(HTTPParserError) -> T
    ) throws(HTTPParserError) -> T {
        let result = buffer.withUnsafeReadableBytes { bytes in
            Result { () throws(HTTPParserError) in try body(UnsafeRawBufferPointer(rebasing: bytes[..<length])) }
        }
        return try result.get()
    }

    // MARK: The head

    /// A whole head, with its body's state set; nil while it is incomplete.
    private mutating func decodeHead() throws(HTTPParserError) -> HTTPServerRequestPart? {
        if scanned == 0 { skipLineEnds() }
        // Nothing yet, or a CR that may be the first half of an empty line.
        guard buffer.readableBytes > 1 || (buffer.readableBytes == 1 && buffer.readableBytesView.first != UInt8(ascii: "\r")) else {
            return nil
        }
        if !requestLineChecked { try checkRequestLineSoFar() }
        guard let length = try findHeadEnd() else { return nil }
        let maxFieldCount = maxFieldCount
        let parsed = try readable(length) { bytes throws(HTTPParserError) in try Self.parseHead(bytes, maxFieldCount: maxFieldCount) }
        buffer.moveReaderIndex(forwardBy: length)
        scanned = 0
        requestLineChecked = false
        methodEnded = false
        let head = parsed.head
        // RFC 9112 §6.1: after an HTTP/1.0 request with a transfer coding, the connection closes.
        if !head.isKeepAlive || (parsed.chunked && head.version == .http1_0) { afterEnd = .closed }
        if parsed.switchesProtocols { afterEnd = .switched }
        if head.method == .CONNECT {
            state = .ending
        } else if parsed.chunked {
            state = .chunkSize
        } else if let length = parsed.contentLength, length > 0 {
            state = .fixedBody(remaining: length)
        } else {
            state = .ending
        }
        return .head(head)
    }

    /// Refuses, as soon as it arrives, a request line that cannot be one: so that a connection
    /// that is not HTTP (a TLS handshake on a plain port, a stray binary protocol) is answered at
    /// once rather than when its bytes reach the head limit.
    ///
    /// What earlier reads held has been looked at already (``scanned``): its bytes were the method's
    /// so far, or the method had ended, and none was a line end. The check resumes after them, so
    /// that a request line sent a byte a read costs no more than one sent whole.
    private mutating func checkRequestLineSoFar() throws(HTTPParserError) {
        let view = buffer.readableBytesView
        let from = view.startIndex + scanned
        if !methodEnded {
            var index = from
            while index < view.endIndex, HeaderName.isTokenByte(view[index]) { index += 1 }
            if index < view.endIndex {
                guard view[index] == UInt8(ascii: " "), index > view.startIndex else { throw .invalidMethod }
                methodEnded = true
            }
        }
        guard let lf = view[from...].firstIndex(of: UInt8(ascii: "\n")) else { return }
        let length = lf - view.startIndex - 1
        guard length >= 0, view[lf - 1] == UInt8(ascii: "\r") else { throw .lfExpected }
        _ = try readable(length, Self.requestLine)
        requestLineChecked = true
    }

    /// The length of the head at the front of the buffer, through the empty line that ends it; nil
    /// while that line has not arrived. A bare LF ending the head is found too, and refused by the
    /// parse, rather than waited past.
    private mutating func findHeadEnd() throws(HTTPParserError) -> Int? {
        let resumeAt = scanned
        let found = buffer.withUnsafeReadableBytes { HTTP1Syntax.headEnd(in: $0, scanned: resumeAt) }
        if let found {
            guard found <= maxHeadBytes else { throw .headerOverflow }
            return found
        }
        scanned = buffer.readableBytes
        guard scanned <= maxHeadBytes else { throw .headerOverflow }
        return nil
    }

    private struct ParsedHead {
        var head: HTTPRequestHead
        var contentLength: Int?
        var chunked: Bool
        var switchesProtocols: Bool
    }

    /// Parses a whole head: the request line, then `name: value` lines, each ending in CR LF.
    private static func parseHead(_ bytes: UnsafeRawBufferPointer, maxFieldCount: Int) throws(HTTPParserError) -> ParsedHead {
        var lines = RequestHeadLines(bytes: bytes)
        guard let firstLine = try lines.next() else { throw .invalidMethod }
        let line = try requestLine(firstLine)
        let method = HTTPMethod(rawValue: String(decoding: line.method, as: UTF8.self))
        let target = String(decoding: line.target, as: UTF8.self)
        let version = line.version
        var headers = HTTPHeaders()
        // One allocation for the fields rather than one each time the storage doubles: a line end
        // per field, and two more (the request line's and the empty line's).
        headers.reserveCapacity(max(0, bytes.count(where: { $0 == UInt8(ascii: "\n") }) - 2))
        var contentLength: Int?
        var transferCoded = false
        var chunkedIsFinal = false
        var upgrades = false
        var connectionUpgrade = false
        while let line = try lines.next(), !line.isEmpty {
            let (name, value) = try field(line)
            guard headers.count < maxFieldCount else { throw .headerOverflow }
            switch name.utf8.count {
            case 14 where HeaderName.matches(name, "content-length"):
                guard contentLength == nil else { throw .unexpectedContentLength }
                guard let length = DecimalDigits.value(of: value.utf8, maxDigits: 18) else { throw .invalidContentLength }
                contentLength = length
            case 17 where HeaderName.matches(name, "transfer-encoding"):
                transferCoded = true
                // The final coding is the last element of the last field (RFC 9112 §6.1).
                chunkedIsFinal = HeaderName.matches(HTTP1Syntax.lastElement(of: value), "chunked")
            case 10 where HeaderName.matches(name, "connection"):
                if HTTP1Syntax.list(value, contains: "upgrade") { connectionUpgrade = true }
            case 7 where HeaderName.matches(name, "upgrade"):
                upgrades = true
            default:
                break
            }
            headers.add(name: name, value: value)
        }
        if transferCoded {
            // RFC 9112 §6.1 and §6.3: a length beside a transfer coding is a smuggling attempt or a
            // mistake, and a request whose final coding is not chunked cannot be delimited.
            guard contentLength == nil else { throw .unexpectedContentLength }
            guard chunkedIsFinal else { throw .unknown }
        }
        let head = HTTPRequestHead(version: version, method: method, uri: target, headers: headers)
        return ParsedHead(
            head: head, contentLength: contentLength, chunked: transferCoded,
            switchesProtocols: method == .CONNECT || (upgrades && connectionUpgrade))
    }

    /// A request line's pieces, in place in the head's bytes.
    private struct RequestLine {
        var method: UnsafeRawBufferPointer
        var target: UnsafeRawBufferPointer
        var version: HTTPVersion
    }

    /// `method SP request-target SP HTTP-version` (RFC 9112 §3), checked without making a string
    /// of any of it: the early check of a request line (``checkRequestLineSoFar()``) costs nothing
    /// when the parse of the whole head reads it again.
    private static func requestLine(_ line: UnsafeRawBufferPointer) throws(HTTPParserError) -> RequestLine {
        guard let firstSpace = line.firstIndex(of: UInt8(ascii: " ")), firstSpace > 0 else { throw .invalidMethod }
        let method = UnsafeRawBufferPointer(rebasing: line[..<firstSpace])
        guard method.allSatisfy(HeaderName.isTokenByte) else { throw .invalidMethod }
        // `HTTP/1.1` and the space before it.
        guard line.count >= firstSpace + 1 + 1 + 9, line[line.count - 9] == UInt8(ascii: " ") else { throw .invalidURL }
        let target = UnsafeRawBufferPointer(rebasing: line[(firstSpace + 1)..<(line.count - 9)])
        guard target.allSatisfy(isTargetByte) else { throw .invalidURL }
        let versionBytes = UnsafeRawBufferPointer(rebasing: line[(line.count - 8)...])
        let version: HTTPVersion
        if versionBytes.elementsEqual("HTTP/1.1".utf8) {
            version = .http1_1
        } else if versionBytes.elementsEqual("HTTP/1.0".utf8) {
            version = .http1_0
        } else {
            throw .invalidVersion
        }
        // Origin form, asterisk form, absolute form (a scheme before `:`), or a CONNECT's authority.
        let first = target[0]
        guard
            first == UInt8(ascii: "/") || first == UInt8(ascii: "*") || method.elementsEqual("CONNECT".utf8)
                || isAbsoluteForm(target)
        else { throw .invalidURL }
        return RequestLine(method: method, target: target, version: version)
    }

    /// What a request target may hold as it arrives: any byte but a control, a space or DEL (what
    /// the gateway may forward is checked where it writes it, ``WireSyntax/isRequestTarget(_:)``).
    @inline(__always)
    private static func isTargetByte(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte != 0x7F
    }

    /// `scheme ":"`, a scheme being a letter followed by letters, digits, `+`, `-` and `.`.
    private static func isAbsoluteForm(_ target: UnsafeRawBufferPointer) -> Bool {
        guard let colon = target.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        let scheme = target[..<colon]
        guard let first = scheme.first, (first | 0x20) >= UInt8(ascii: "a"), (first | 0x20) <= UInt8(ascii: "z") else { return false }
        return scheme.allSatisfy { byte in
            switch byte | 0x20 {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): true
            default:
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: ".")
            }
        }
    }

    /// `field-name ":" OWS field-value OWS` (RFC 9112 §5): the name and the trimmed value.
    private static func field(_ line: UnsafeRawBufferPointer) throws(HTTPParserError) -> (name: String, value: String) {
        // A fold and whitespace before the colon are refused with the rest, as llhttp refuses them.
        guard case .field(let name, let value) = HTTP1Syntax.fieldLine(line) else { throw .invalidHeaderToken }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }
}

/// The lines of a whole head, each without its CR LF; a bare LF, or a CR anywhere else, is refused.
private struct RequestHeadLines {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    mutating func next() throws(HTTPParserError) -> UnsafeRawBufferPointer? {
        guard position < bytes.count else { return nil }
        var end = position
        while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
        guard end > position, bytes[end - 1] == UInt8(ascii: "\r") else { throw .lfExpected }
        let line = UnsafeRawBufferPointer(rebasing: bytes[position..<(end - 1)])
        position = end + 1
        guard !line.contains(UInt8(ascii: "\r")) else { throw .lfExpected }
        return line
    }
}
