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

    var errorMessage: String {
        let text = String(cString: errorBuffer)
        return text.isEmpty ? "" : text
    }

    /// Header callback: one raw line per call, status line and final empty line included.
    func receivedHeaderLine(_ line: UnsafeRawBufferPointer) {
        var end = line.count
        while end > 0, line[end - 1] == UInt8(ascii: "\n") || line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<end]), as: UTF8.self)
        if text.hasPrefix("HTTP/") {
            // A new status line (after a 1xx, or the first one): start the head again.
            let parts = text.split(separator: " ", maxSplits: 2)
            status = parts.count >= 2 ? Int(parts[1]) ?? 0 : 0
            headers.removeAll(keepingCapacity: true)
        } else if text.isEmpty {
            if status >= 200 && !headDelivered {
                headDelivered = true
                pendingHead = UpstreamResponseHead(status: status, headers: headers)
                isDirty = true
            }
        } else if let first = text.first, first == " " || first == "\t", !headers.isEmpty {
            // obs-fold: a continuation of the previous field value (RFC 9112 §5.2).
            headers[headers.count - 1].value += " " + text.trimmingASCIIWhitespace()
        } else if let colon = text.firstIndex(of: ":") {
            let name = String(text[..<colon])
            let value = text[text.index(after: colon)...].trimmingASCIIWhitespace()
            headers.append((name, value))
        }
    }

    /// Write callback: appends to the pending body unless the consumer has too much outstanding.
    /// Returns false to make libcurl pause (the chunk is then delivered again on resume).
    func receivedBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard flow.reserve(bytes.count) else { return false }
        if pendingBody == nil {
            pendingBody = ByteBufferAllocator().buffer(capacity: max(bytes.count, 16 * 1024))
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

extension StringProtocol {
    func trimmingASCIIWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[start...last])
    }
}
