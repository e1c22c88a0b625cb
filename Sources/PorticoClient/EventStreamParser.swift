/// Turns the bytes of a `text/event-stream` body into events, by the HTML standard's "event stream
/// interpretation" (§9.2.6), whatever the chunks the network cut them into:
///
/// - lines end with CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of the
///   next are one line end); a byte order mark before the first line is dropped;
/// - a line starting with `:` is a comment (a heartbeat) and ignored;
/// - `field: value` (one space after the colon dropped), or a bare `field` with an empty value:
///   `data` appends a line to the event's data, `event` sets its type, `id` sets the last event
///   ID unless the value holds NUL, `retry` sets the reconnection time when it is all digits;
///   other fields are ignored;
/// - a blank line makes the last `id:` the stream's last event ID and dispatches the event, when
///   it has data; at the end of the stream an event without its blank line is dropped, and so is
///   an `id:` read since the last blank line.
///
/// A line, or an event's data, longer than `maximumEventBytes` is refused: a stream is untrusted
/// input, and an app must not grow its memory for a server that never ends a line.
struct EventStreamParser: Sendable {
    /// The stream's last event ID: the last `id:` as of the latest blank line, kept across events
    /// and reconnections; what a reconnection sends.
    private(set) var lastEventID: String
    /// The last `id:` read, which becomes ``lastEventID`` at the next blank line: an event cut off
    /// before its end must not move the ID a reconnection resumes after.
    private var idBuffer: String
    /// The reconnection time the stream last asked for with `retry:`.
    private(set) var retry: Duration?
    let maximumEventBytes: Int

    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var hasData = false
    private var type = ""
    /// The previous byte was a CR: an LF now completes the same line end.
    private var afterCR = false
    /// No line has ended yet: the first may start with a byte order mark.
    private var firstLine = true

    init(lastEventID: String = "", maximumEventBytes: Int = 1 << 20) {
        self.lastEventID = lastEventID
        self.idBuffer = lastEventID
        self.maximumEventBytes = maximumEventBytes
    }

    /// The events `bytes` completes, in order.
    mutating func feed(_ bytes: some Sequence<UInt8>) throws(EventStreamError) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\n") where afterCR:
                afterCR = false
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                afterCR = byte == UInt8(ascii: "\r")
                if let event = endLine() { events.append(event) }
            default:
                afterCR = false
                guard line.count + data.count < maximumEventBytes else { throw .eventTooLarge(limit: maximumEventBytes) }
                line.append(byte)
            }
        }
        return events
    }

    /// The stream ended (or the connection was lost): an event not yet ended by its blank line is
    /// dropped, with any `id:` it carried, and the next bytes start a new stream (a
    /// reconnection's), keeping the last event ID and the reconnection time.
    mutating func restart() {
        line.removeAll(keepingCapacity: true)
        data.removeAll(keepingCapacity: true)
        hasData = false
        type = ""
        idBuffer = lastEventID
        afterCR = false
        firstLine = true
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer {
            line.removeAll(keepingCapacity: true)
            firstLine = false
        }
        if firstLine, line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        guard !line.isEmpty else { return dispatch() }
        if line[0] == UInt8(ascii: ":") { return nil }
        let field: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            field = line[..<colon]
            value = line[(colon + 1)...]
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        } else {
            field = line[...]
            value = []
        }
        switch String(decoding: field, as: UTF8.self) {
        case "data":
            if hasData { data.append(UInt8(ascii: "\n")) }
            data.append(contentsOf: value)
            hasData = true
        case "event":
            type = String(decoding: value, as: UTF8.self)
        case "id" where !value.contains(0):
            idBuffer = String(decoding: value, as: UTF8.self)
        case "retry" where !value.isEmpty && value.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }):
            // Digits only; a value too long for an Int is a reconnection time no one waits for.
            retry = Int(String(decoding: value, as: UTF8.self)).map { .milliseconds($0) } ?? retry
        default:
            break
        }
        return nil
    }

    private mutating func dispatch() -> ServerSentEvent? {
        // Every blank line commits the ID, with or without an event to dispatch.
        lastEventID = idBuffer
        defer {
            data.removeAll(keepingCapacity: true)
            hasData = false
            type = ""
        }
        guard hasData else { return nil }
        return ServerSentEvent(
            type: type.isEmpty ? "message" : type, data: String(decoding: data, as: UTF8.self), lastEventID: lastEventID)
    }
}
