import PorticoTestSupport

/// An HTTP/2 client that writes frames byte by byte, for the tests that must send what no real
/// client would (floods, resets, malformed requests) and read exactly what the gateway answers.
/// Prior knowledge over plain TCP (an `h2c` listener): past the preface, the gateway's HTTP/2
/// pipeline is the same as behind TLS's ALPN. Used by one thread at a time (hence unchecked).
final class RawHTTP2Client: @unchecked Sendable {
    struct Frame: CustomStringConvertible {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]

        /// GOAWAY's or RST_STREAM's error code.
        var errorCode: UInt32? {
            switch type {
            case 0x7 where payload.count >= 8: return UInt32(bytes: payload[4..<8])
            case 0x3 where payload.count >= 4: return UInt32(bytes: payload[0..<4])
            default: return nil
            }
        }

        var description: String { "frame(type: \(type), flags: \(flags), stream: \(stream), \(payload.count) bytes)" }
    }

    enum FrameType {
        static let data: UInt8 = 0x0
        static let headers: UInt8 = 0x1
        static let rstStream: UInt8 = 0x3
        static let settings: UInt8 = 0x4
        static let ping: UInt8 = 0x6
        static let goAway: UInt8 = 0x7
        static let windowUpdate: UInt8 = 0x8
        static let continuation: UInt8 = 0x9
    }

    enum ErrorCode {
        static let noError: UInt32 = 0x0
        static let protocolError: UInt32 = 0x1
        static let cancel: UInt32 = 0x8
        static let refusedStream: UInt32 = 0x7
        static let enhanceYourCalm: UInt32 = 0xb
    }

    let raw: RawHTTPClient

    /// Connects and sends the preface and an empty SETTINGS frame (or `settings`: pairs of id and value).
    init(port: Int, settings: [(UInt16, UInt32)] = [], receiveTimeout: Double = 10) throws {
        raw = try RawHTTPClient(port: port, receiveTimeout: receiveTimeout)
        try raw.send(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        var payload: [UInt8] = []
        for (id, value) in settings { payload += id.bytes + value.bytes }
        try send(type: FrameType.settings, stream: 0, payload: payload)
    }

    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, payload: [UInt8] = []) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags] + stream.bytes + payload
    }

    func send(type: UInt8, flags: UInt8 = 0, stream: UInt32, payload: [UInt8] = []) throws {
        try raw.send(Self.frame(type: type, flags: flags, stream: stream, payload: payload))
    }

    /// A request's header block: HPACK literals without indexing, no Huffman coding.
    static func headerBlock(_ fields: [(String, String)]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block.append(0x00)
            block += hpackInteger(name.utf8.count, prefixBits: 7) + Array(name.utf8)
            block += hpackInteger(value.utf8.count, prefixBits: 7) + Array(value.utf8)
        }
        return block
    }

    static func hpackInteger(_ value: Int, prefixBits: Int, firstByte: UInt8 = 0) -> [UInt8] {
        let limit = (1 << prefixBits) - 1
        if value < limit { return [firstByte | UInt8(value)] }
        var bytes = [firstByte | UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            bytes.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        bytes.append(UInt8(rest))
        return bytes
    }

    static func requestFields(
        method: String = "GET", path: String, authority: String = "gateway.test", extra: [(String, String)] = []
    )
        -> [(String, String)]
    {
        [(":method", method), (":scheme", "http"), (":authority", authority), (":path", path)] + extra
    }

    /// HEADERS with END_HEADERS (and END_STREAM unless a body follows).
    func request(stream: UInt32, method: String = "GET", path: String, extra: [(String, String)] = [], endStream: Bool = true) throws {
        let block = Self.headerBlock(Self.requestFields(method: method, path: path, extra: extra))
        try send(type: FrameType.headers, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, payload: block)
    }

    /// The next frame; nil at EOF (or a reset connection).
    func readFrame() throws -> Frame? {
        guard let header = try readBytes(9) else { return nil }
        let length = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
        guard let payload = try readBytes(length) else { return nil }
        return Frame(type: header[3], flags: header[4], stream: UInt32(bytes: header[5..<9]) & 0x7FFF_FFFF, payload: payload)
    }

    /// Frames until one matches (answering PINGs, as a client must); nil if the connection ends first.
    func readFrame(until matches: (Frame) -> Bool) throws -> Frame? {
        while let frame = try readFrame() {
            if matches(frame) { return frame }
            if frame.type == FrameType.ping && frame.flags & 0x1 == 0 {
                try? send(type: FrameType.ping, flags: 0x1, stream: 0, payload: frame.payload)
            }
        }
        return nil
    }

    /// The GOAWAY the gateway sends; nil if the connection ends without one.
    func readGoAway() throws -> Frame? { try readFrame { $0.type == FrameType.goAway } }

    /// Every frame until the connection ends; true if it ended (rather than the read timing out).
    func readUntilClosed() -> (frames: [Frame], closed: Bool) {
        var frames: [Frame] = []
        while true {
            do {
                guard let frame = try readFrame() else { return (frames, true) }
                frames.append(frame)
            } catch is RawHTTPClient.TimeoutError {
                return (frames, false)
            } catch {
                return (frames, true)
            }
        }
    }

    private func readBytes(_ count: Int) throws -> [UInt8]? {
        do {
            return try raw.readExactly(count)
        } catch is RawHTTPClient.ClosedError {
            return nil
        }
    }
}

extension UInt32 {
    fileprivate var bytes: [UInt8] { [UInt8(self >> 24), UInt8(self >> 16 & 0xff), UInt8(self >> 8 & 0xff), UInt8(self & 0xff)] }
    init(bytes: ArraySlice<UInt8>) {
        self = bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }
}

extension UInt16 {
    fileprivate var bytes: [UInt8] { [UInt8(self >> 8), UInt8(self & 0xff)] }
}
