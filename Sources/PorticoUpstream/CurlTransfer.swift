import CPorticoCurl
import NIOCore

/// One exchange while libcurl works on it. Confined to its worker's thread, apart from `flow`.
///
/// libcurl calls back into it through `CURLOPT_HEADERDATA`/`CURLOPT_WRITEDATA`; what the callbacks
/// collect is held as pending events and shipped to the event loop in one hop per loop turn of the
/// worker (``CurlWorker``), so a small response costs a single `execute` on the event loop.
final class CurlTransfer {
    let id: Int
    let eventLoop: any EventLoop
    let handler: NIOLoopBound<any UpstreamResponseHandler>
    let flow: FlowControl
    let started: ContinuousClock.Instant

    var easy: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    // Response parsing state.
    private var status = 0
    private var headers: [(name: String, value: String)] = []
    private(set) var headDelivered = false

    // Events not yet shipped to the event loop.
    var pendingHead: UpstreamResponseHead?
    var pendingBody: ByteBuffer?
    var isDirty = false

    init(id: Int, eventLoop: any EventLoop, handler: NIOLoopBound<any UpstreamResponseHandler>, flow: FlowControl) {
        self.id = id
        self.eventLoop = eventLoop
        self.handler = handler
        self.flow = flow
        self.started = .now
        errorBuffer.initialize(to: 0)
    }

    deinit {
        errorBuffer.deallocate()
        if let headerList { curl_slist_free_all(headerList) }
    }

    /// libcurl's detailed message for a failed transfer (empty if it gave none).
    var errorMessage: String { String(cString: errorBuffer) }

    /// Header callback: one raw line per call, status line and final empty line included.
    func receivedHeaderLine(_ line: UnsafeRawBufferPointer) {
        var end = line.count
        while end > 0, line[end - 1] == UInt8(ascii: "\n") || line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let bytes = UnsafeRawBufferPointer(rebasing: line[0..<end])
        if bytes.isEmpty {
            if status >= 200 && !headDelivered {
                headDelivered = true
                pendingHead = UpstreamResponseHead(status: status, headers: headers)
                isDirty = true
            }
        } else if bytes.starts(with: "HTTP/".utf8) {
            // A new status line (after a 1xx, or the first one): start the head again.
            status = Self.statusCode(in: bytes)
            headers.removeAll(keepingCapacity: true)
        } else if bytes[0] == UInt8(ascii: " ") || bytes[0] == UInt8(ascii: "\t") {
            // obs-fold: a continuation of the previous field value (RFC 9112 §5.2).
            if !headers.isEmpty { headers[headers.count - 1].value += " " + Self.trimmed(bytes[...]) }
        } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            let name = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<colon]), as: UTF8.self)
            headers.append((name, Self.trimmed(bytes[(colon + 1)...])))
        }
    }

    /// The three digits after the first space of a status line; 0 if there are none.
    private static func statusCode(in line: UnsafeRawBufferPointer) -> Int {
        guard let space = line.firstIndex(of: UInt8(ascii: " ")), space + 4 <= line.count else { return 0 }
        var code = 0
        for index in (space + 1)...(space + 3) {
            let digit = line[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return 0 }
            code = code * 10 + Int(digit)
        }
        return code
    }

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
        while end > start, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\t") { end -= 1 }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes.base[start..<end]), as: UTF8.self)
    }

    /// Write callback: appends to the pending body unless the consumer has too much outstanding.
    /// Returns false to make libcurl pause (the chunk is then delivered again on resume).
    func receivedBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard flow.reserve(bytes.count) else { return false }
        if pendingBody == nil {
            // Exactly the chunk: most responses are one chunk, and a 16 KiB buffer per small
            // response showed up as malloc trimming in profiles. Later chunks of the same turn grow it.
            pendingBody = ByteBufferAllocator().buffer(capacity: bytes.count)
        }
        pendingBody!.writeBytes(bytes)
        isDirty = true
        return true
    }

    /// Ships pending events (and, if given, the end of the exchange) to the event loop in one hop.
    func ship(finishing result: Result<UpstreamMetrics, UpstreamError>? = nil) {
        let head = pendingHead
        let body = pendingBody
        pendingHead = nil
        pendingBody = nil
        isDirty = false
        guard head != nil || body != nil || result != nil else { return }
        let handler = self.handler
        let events = UpstreamEvents(head: head, body: body, result: result)
        eventLoop.execute { handler.value.upstreamReceived(events) }
    }
}
