import NIOCore

/// Follows a client's HTTP/2 byte stream frame by frame, reading only the 9-byte frame headers,
/// for the two things NIO's HTTP/2 handler leaves to its user: how long a header block has been
/// arriving (a block that never ends holds the whole connection, since no other frame may come
/// between its HEADERS and its last CONTINUATION), and how many WINDOW_UPDATE frames arrive (NIO
/// rate-limits resets and control frames, not these).
///
/// A struct fed bytes and returning what they mean, so it is tested without a channel. It never
/// copies a payload: it counts past it.
struct HTTP2FrameScanner {
    /// What a read told the scanner, in order of importance to the handler.
    enum Event: Equatable {
        /// A HEADERS (or PUSH_PROMISE) frame began a header block: its end is now due.
        case headerBlockStarted
        /// The frame that ends the block (END_HEADERS) has arrived whole.
        case headerBlockEnded
        /// More WINDOW_UPDATE frames than allowed within the window.
        case windowUpdateFlood
    }

    /// The client connection preface (RFC 9113 §3.4), which precedes the first frame.
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private enum Position {
        /// This many bytes of the preface are still to come.
        case preface(remaining: Int)
        /// Reading a frame header: how many of its 9 bytes have been seen, and what they said.
        case frameHeader(FrameHeader)
        /// Counting past a payload: the bytes left, and whether the frame ends a header block.
        case payload(remaining: Int, endsHeaderBlock: Bool)
    }

    /// A frame header read byte by byte (no buffer: a read may cut it anywhere).
    struct FrameHeader {
        var seen = 0
        var length = 0
        var type: UInt8 = 0
        var flags: UInt8 = 0
        var stream: UInt32 = 0

        mutating func add(_ byte: UInt8) {
            switch seen {
            case 0..<3: length = length << 8 | Int(byte)
            case 3: type = byte
            case 4: flags = byte
            default: stream = stream << 8 | UInt32(byte)
            }
            seen += 1
        }
    }

    private var position = Position.preface(remaining: HTTP2FrameScanner.preface.count)
    /// Whether a header block has begun and its END_HEADERS frame has not arrived whole.
    private(set) var inHeaderBlock = false
    /// The highest stream a client opened: a GOAWAY names it as the last one processed.
    private(set) var lastClientStream: UInt32 = 0
    private var windowUpdates: FloodCounter

    init(maxWindowUpdates: Int, floodWindow: TimeAmount) {
        windowUpdates = FloodCounter(limit: maxWindowUpdates, window: floodWindow)
    }

    /// Reads past `bytes`, returning what happened in them (at most one event of each kind,
    /// in the order they happened, a block's end only if it is over by the end of the read).
    mutating func scan(_ bytes: ByteBuffer, now: NIODeadline) -> [Event] {
        var events: [Event] = []
        var view = bytes.readableBytesView[...]
        while !view.isEmpty {
            switch position {
            case .preface(let remaining):
                let taken = min(remaining, view.count)
                view = view.dropFirst(taken)
                position = remaining == taken ? .frameHeader(FrameHeader()) : .preface(remaining: remaining - taken)
            case .frameHeader(var header):
                while header.seen < 9, let byte = view.first {
                    header.add(byte)
                    view = view.dropFirst()
                }
                guard header.seen == 9 else {
                    position = .frameHeader(header)
                    continue
                }
                if let event = frameBegins(header, now: now), !events.contains(event) { events.append(event) }
            case .payload(let remaining, let endsBlock):
                let taken = min(remaining, view.count)
                view = view.dropFirst(taken)
                if taken < remaining {
                    position = .payload(remaining: remaining - taken, endsHeaderBlock: endsBlock)
                } else {
                    position = .frameHeader(FrameHeader())
                    if endsBlock { blockEnded(&events) }
                }
            }
        }
        // A frame with no payload that ends a block ends it at once.
        if case .payload(0, true) = position {
            position = .frameHeader(FrameHeader())
            blockEnded(&events)
        }
        return events
    }

    private mutating func blockEnded(_ events: inout [Event]) {
        inHeaderBlock = false
        events.removeAll { $0 == .headerBlockStarted }
        if !events.contains(.headerBlockEnded) { events.append(.headerBlockEnded) }
    }

    /// A whole frame header: where its payload ends, and what the frame means here.
    private mutating func frameBegins(_ header: FrameHeader, now: NIODeadline) -> Event? {
        let length = header.length
        let type = header.type
        let flags = header.flags
        let stream = header.stream & 0x7FFF_FFFF
        var event: Event?
        var endsBlock = false
        switch type {
        case 0x1, 0x5:  // HEADERS, PUSH_PROMISE
            if type == 0x1 && stream % 2 == 1 { lastClientStream = max(lastClientStream, stream) }
            if !inHeaderBlock {
                inHeaderBlock = true
                event = .headerBlockStarted
            }
            endsBlock = flags & 0x4 != 0
        case 0x9:  // CONTINUATION
            endsBlock = flags & 0x4 != 0
        case 0x8:  // WINDOW_UPDATE
            if !windowUpdates.record(now) { event = .windowUpdateFlood }
        default:
            break
        }
        // A block's last frame with no payload ends it at once: in the loop, or in the check after it.
        position = .payload(remaining: length, endsHeaderBlock: endsBlock && inHeaderBlock)
        return event
    }
}

/// Counts events within a fixed window that restarts once it has passed: cheap (two integers),
/// and a flood of more than `limit` within any one window is caught, give or take one window.
struct FloodCounter {
    let limit: Int
    let window: TimeAmount
    private var windowStart: NIODeadline?
    private var count = 0

    init(limit: Int, window: TimeAmount) {
        self.limit = limit
        self.window = window
    }

    /// Counts one event at `now`; false once the count within the window is over the limit.
    mutating func record(_ now: NIODeadline) -> Bool {
        if let start = windowStart, now - start < window {
            count += 1
        } else {
            windowStart = now
            count = 1
        }
        return count <= limit
    }
}
