import NIOCore

/// Follows one direction of a WebSocket connection frame by frame (RFC 6455 §5.2), reading each
/// frame's header and skipping its payload, so the gateway knows where one frame ends and the
/// next begins. It never copies or unmasks a payload: the bytes pass through as they came.
///
/// The gateway needs that much to close a stream itself (idle, lifetime, shutdown, a key revoked):
/// a close frame can only be put between two frames, never inside one. It also learns whether a
/// side has sent its own close frame, for the access log.
struct WebSocketFrameCursor {
    /// Header bytes of the frame being read, before its payload: at most 14.
    private var header: (UInt64, UInt64) = (0, 0)
    private var headerRead = 0
    private var headerLength = 2
    private var payloadLeft: UInt64 = 0
    /// The framing broke the protocol (a 64-bit length with its top bit set): the cursor no longer
    /// knows where frames end, and the gateway closes without a frame of its own.
    private(set) var lost = false
    /// A close frame (opcode 8) has begun in this direction.
    private(set) var sawClose = false

    /// Between two frames: a frame of the gateway's own may be written now.
    var atBoundary: Bool { !lost && headerRead == 0 && payloadLeft == 0 }

    /// Moves over `bytes`, which follow what the cursor has seen.
    mutating func advance(over bytes: ByteBuffer) {
        guard !lost else { return }
        var view = bytes.readableBytesView[...]
        while !view.isEmpty {
            if payloadLeft > 0 {
                let skip = UInt64(view.count) < payloadLeft ? view.count : Int(payloadLeft)
                view = view.dropFirst(skip)
                payloadLeft -= UInt64(skip)
                continue
            }
            let byte = view.first!
            view = view.dropFirst()
            store(byte, at: headerRead)
            headerRead += 1
            if headerRead == 2 {
                let length7 = byte & 0x7F
                headerLength = 2 + (length7 == 126 ? 2 : length7 == 127 ? 8 : 0) + (byte & 0x80 != 0 ? 4 : 0)
            }
            if headerRead == headerLength { frameHeaderEnded() }
        }
    }

    private mutating func store(_ byte: UInt8, at index: Int) {
        if index < 8 {
            header.0 |= UInt64(byte) << UInt64(8 * index)
        } else {
            header.1 |= UInt64(byte) << UInt64(8 * (index - 8))
        }
    }

    private func byte(at index: Int) -> UInt8 {
        index < 8
            ? UInt8(truncatingIfNeeded: header.0 >> UInt64(8 * index)) : UInt8(truncatingIfNeeded: header.1 >> UInt64(8 * (index - 8)))
    }

    private mutating func frameHeaderEnded() {
        if byte(at: 0) & 0x0F == 0x8 { sawClose = true }
        let length7 = byte(at: 1) & 0x7F
        var length = UInt64(length7)
        if length7 == 126 {
            length = UInt64(byte(at: 2)) << 8 | UInt64(byte(at: 3))
        } else if length7 == 127 {
            length = 0
            for index in 2..<10 { length = length << 8 | UInt64(byte(at: index)) }
            if length >> 63 != 0 { lost = true }
        }
        payloadLeft = length
        header = (0, 0)
        headerRead = 0
        headerLength = 2
    }

    /// A close frame with `code` and no reason (§5.5.1), as a server sends it: unmasked.
    static func serverClose(_ code: UInt16) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(0x88))
        buffer.writeInteger(UInt8(2))
        buffer.writeInteger(code)
        return buffer
    }

    /// The same close frame as a client must send it, masked with `mask` (§5.3).
    static func clientClose(_ code: UInt16, mask: UInt32 = .random(in: .min ... .max)) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt8(0x88))
        buffer.writeInteger(UInt8(0x82))
        buffer.writeInteger(mask)
        buffer.writeInteger(UInt8(code >> 8) ^ UInt8(truncatingIfNeeded: mask >> 24))
        buffer.writeInteger(UInt8(truncatingIfNeeded: code) ^ UInt8(truncatingIfNeeded: mask >> 16))
        return buffer
    }
}

/// Close codes the gateway sends (RFC 6455 §7.4.1).
enum WebSocketCloseCode {
    /// Going away: the gateway shuts down, or the stream reached its lifetime or idle limit.
    static let goingAway: UInt16 = 1001
    /// Policy violation: the key that opened the stream was revoked.
    static let policyViolation: UInt16 = 1008
}
