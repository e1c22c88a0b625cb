import CPorticoCurl
import NIOCore
import NIOHTTP1

/// One exchange while libcurl works on it. Confined to its worker's thread, apart from `flow`.
///
/// libcurl calls back into it through `CURLOPT_HEADERDATA`/`CURLOPT_WRITEDATA`; what the callbacks
/// collect is held as pending events and shipped to the event loop in one hop per loop turn of the
/// worker (``CurlWorker``), so a small response costs a single `execute` on the event loop.
///
/// It also holds the backend to its response's framing (``ResponseFraming``; the rules and what
/// libcurl does with each violation are in `docs/upstream.md`): a head that frames its body
/// ambiguously, a body shorter than declared or bytes beyond it fail the exchange with
/// `.badResponse`, and a small declared body is held back until it is proven whole.
final class CurlTransfer {

    let id: Int
    let eventLoop: any EventLoop
    let handler: NIOLoopBound<any UpstreamResponseHandler>
    let flow: FlowControl
    let started: ContinuousClock.Instant
    /// A response to HEAD declares a body that never follows.
    let requestIsHEAD: Bool
    /// Whether bytes waiting on the socket after the response show the backend sent too much. Only
    /// on plain TCP: over TLS the socket also carries records that are not response bytes (session
    /// tickets, alerts), and decrypted excess sits inside OpenSSL where a peek cannot see it.
    let peeksForExcess: Bool
    /// The worker's table of backend sockets.
    unowned let sockets: BackendSockets
    /// Sockets libcurl opened for this transfer (none when it reuses a connection).
    private var openedSockets: [Int32] = []
    /// The socket of the connection this transfer uses, once libcurl has chosen it.
    private var socket: Int32?

    var easy: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    // Response parsing state.
    private var status = 0
    private var headers: [(name: String, value: String)] = []
    /// Whether the final head's end was seen.
    private(set) var headReceived = false
    /// Set up as an event stream's transfer (`Accept: text/event-stream`): its time limit is a
    /// bound on each wait, this long, not on the whole transfer.
    var eventWait: Duration?
    /// The final head's framing, once it was seen and found unambiguous.
    private(set) var framing: ResponseFraming?
    /// Body bytes taken from libcurl so far.
    private(set) var bodyReceived = 0
    /// Whether head and body wait for the end of the transfer (see ``ResponseFraming/heldBodyLimit``).
    private var holding = false
    /// Why the response cannot be trusted, once that is known; the exchange then fails with it
    /// whatever libcurl reports.
    private(set) var framingFailure: UpstreamError?

    // Events not yet shipped to the event loop.
    var pendingHead: UpstreamResponseHead?
    var pendingBody: ByteBuffer?
    var isDirty = false

    init(
        id: Int, eventLoop: any EventLoop, handler: NIOLoopBound<any UpstreamResponseHandler>, flow: FlowControl,
        requestIsHEAD: Bool, peeksForExcess: Bool, sockets: BackendSockets
    ) {
        self.id = id
        self.eventLoop = eventLoop
        self.handler = handler
        self.flow = flow
        self.started = .now
        self.requestIsHEAD = requestIsHEAD
        self.peeksForExcess = peeksForExcess
        self.sockets = sockets
        errorBuffer.initialize(to: 0)
    }

    deinit {
        errorBuffer.deallocate()
        if let headerList { curl_slist_free_all(headerList) }
    }

    /// libcurl's detailed message for a failed transfer (empty if it gave none).
    var errorMessage: String { String(cString: errorBuffer) }

    /// Header callback: one raw line per call, status line and final empty line included (and, after
    /// a chunked body, its trailer fields). Returns false to abort the transfer.
    func receivedHeaderLine(_ line: UnsafeRawBufferPointer) -> Bool {
        var end = line.count
        while end > 0, line[end - 1] == UInt8(ascii: "\n") || line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let bytes = UnsafeRawBufferPointer(rebasing: line[0..<end])
        if bytes.isEmpty {
            if status >= 200 && !headReceived { return receivedHeadEnd() }
        } else if bytes.starts(with: "HTTP/".utf8) {
            // A new status line (after a 1xx, or the first one): start the head again.
            guard !headReceived else { return refuse(UpstreamError(.badResponse, detail: "a second response head arrived")) }
            status = Self.statusCode(in: bytes)
            headers.removeAll(keepingCapacity: true)
            if status >= 100 && status < 200 {
                interimCount += 1
                if case .failure(let error) = ResponseFraming.interim(status: status, count: interimCount) { return refuse(error) }
            }
        } else if bytes[0] == UInt8(ascii: " ") || bytes[0] == UInt8(ascii: "\t") {
            // obs-fold: a continuation of the previous field value (RFC 9112 §5.2).
            if !headers.isEmpty { headers[headers.count - 1].value += " " + Self.trimmed(bytes[...]) }
        } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            let name = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<colon]), as: UTF8.self)
            headers.append((name, Self.trimmed(bytes[(colon + 1)...])))
        }
        return true
    }

    /// Interim (1xx) heads seen so far (``ResponseFraming/interim(status:count:)``).
    private var interimCount = 0

    /// Fails the exchange with `error` and keeps libcurl from reusing the connection; returns false
    /// for the callback to abort the transfer.
    private func refuse(_ error: UpstreamError) -> Bool {
        if framingFailure == nil { framingFailure = error }
        if let easy { _ = portico_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1) }
        return false
    }

    /// The final head is complete: check its framing, then ship it at once, or hold it with its
    /// body until the transfer ends. Returns false (abort) when the framing cannot be trusted.
    private func receivedHeadEnd() -> Bool {
        headReceived = true
        let framing: ResponseFraming
        switch ResponseFraming.of(status: status, headers: headers, requestIsHEAD: requestIsHEAD) {
        case .failure(let error):
            framingFailure = error
            return false
        case .success(let value):
            framing = value
        }
        self.framing = framing
        switch framing.body {
        case .none, .length(0):
            // The response ends with its head; anything already waiting behind it is excess.
            if backendSentExcess() {
                framingFailure = UpstreamError(.badResponse, detail: "backend sent bytes after a response without a body")
                return false
            }
            holding = true
        case .length, .transferCoded, .untilClose:
            holding = framing.isHeldBack
        }
        pendingHead = UpstreamResponseHead(status: status, headers: HTTPHeaders(headers), contentLength: framing.contentLength)
        if !holding { isDirty = true }
        return true
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

    /// What the write callback tells libcurl.
    enum BodyDecision {
        case accept
        /// The consumer has too much outstanding: libcurl delivers the same bytes again on resume.
        case pause
        /// The response broke its framing: end the transfer (libcurl then closes the connection).
        case abort
    }

    /// Write callback: appends to the pending body unless the consumer has too much outstanding or
    /// the backend has sent more than its `Content-Length`.
    func receivedBody(_ bytes: UnsafeRawBufferPointer) -> BodyDecision {
        // libcurl reported excess in the read these bytes came from: refuse them, so a streamed
        // body stops short of its declared length and the client sees it cut off.
        if framingFailure != nil { return .abort }
        // Only a final head frames a body: bytes before it (after a 101 libcurl followed, say) are
        // the backend's raw stream, and must never be written to a client.
        guard framing != nil else {
            _ = refuse(ResponseFraming.bodyBeforeHead)
            return .abort
        }
        if case .length(let declared)? = framing?.body, bodyReceived + bytes.count == declared, backendSentExcess() {
            framingFailure = UpstreamError(.badResponse, detail: "backend sent more than the \(declared) bytes its Content-Length declared")
            return .abort
        }
        guard flow.reserve(bytes.count) else { return .pause }
        if pendingBody == nil {
            // Exactly the chunk: most responses are one chunk, and a 16 KiB buffer per small
            // response showed up as malloc trimming in profiles. Later chunks of the same turn grow it.
            pendingBody = ByteBufferAllocator().buffer(capacity: bytes.count)
        }
        pendingBody!.writeBytes(bytes)
        bodyReceived += bytes.count
        if !holding { isDirty = true }
        return .accept
    }

    /// Debug callback, informational text only. libcurl 7.88 reports bytes beyond the response that
    /// arrived in the same read as its end nowhere else: it drops them, and only after a body of
    /// declared length does it also close the connection.
    func libcurlSaid(_ text: UnsafeRawBufferPointer) {
        guard text.starts(with: "Excess found".utf8) else { return }
        if framingFailure == nil {
            framingFailure = UpstreamError(.badResponse, detail: "backend sent more bytes than its response's framing declares")
        }
        // After a response without a body libcurl would keep the connection for the next request;
        // a backend that overran its framing is not trusted with one.
        if let easy { _ = portico_easy_setopt_long(easy, CURLOPT_FORBID_REUSE, 1) }
    }

    /// Socket-option callback: libcurl opened `socket` to connect this transfer.
    func opened(_ socket: Int32) {
        if peeksForExcess { openedSockets.append(socket) }
    }

    /// Pre-request callback: libcurl has a connection for this transfer, new or reused, and is about
    /// to send the request on it. Returns false to abort the transfer before the request is sent.
    func connectionReady(_ connection: BackendSockets.Connection) -> Bool {
        guard peeksForExcess else { return true }
        let reused = openedSockets.isEmpty
        socket = sockets.socket(for: connection, opened: openedSockets)
        openedSockets.removeAll()
        // Bytes waiting on an idle connection answer no request: most likely the rest of an earlier
        // response that overran its framing after its exchange had ended. libcurl 7.88 would read
        // them as this request's response.
        if reused, let socket, BackendSockets.hasPendingBytes(socket) {
            framingFailure = UpstreamError(.badResponse, detail: "backend sent bytes on an idle connection")
            foundStaleConnection = true
            return false
        }
        return true
    }

    /// Whether the transfer was aborted, its request unsent, because its connection held stale bytes.
    private var foundStaleConnection = false
    /// Whether it has been started again for that reason already.
    private var restarted = false

    /// After a transfer ended: whether to start it again, once, because it was aborted before its
    /// request was sent on a connection holding stale bytes. Nothing was sent, so this is safe for
    /// any method; the aborted transfer made libcurl close that connection. Resets what the first
    /// attempt recorded.
    func restartsAfterStaleConnection() -> Bool {
        guard foundStaleConnection, !restarted else { return false }
        restarted = true
        foundStaleConnection = false
        framingFailure = nil
        socket = nil
        errorBuffer[0] = 0
        return true
    }

    /// Whether bytes wait on the backend connection right now. Called when the response has just
    /// ended by its framing, so on plain TCP such bytes are the backend's excess: libcurl never reads
    /// past a declared length, and 7.88 would hand them to the next request on this connection as
    /// the start of its response.
    private func backendSentExcess() -> Bool {
        guard let socket else { return false }
        return BackendSockets.hasPendingBytes(socket)
    }

    /// Ships pending events (and, if given, the end of the exchange) to the event loop in one hop.
    ///
    /// A failed exchange delivers nothing it still holds: a held response becomes the failure alone
    /// (the gateway answers 502 instead of a response cut short), and a streamed body stops before
    /// bytes that came with the failure.
    func ship(finishing result: Result<UpstreamMetrics, UpstreamError>? = nil) {
        var head = pendingHead
        var body = pendingBody
        pendingHead = nil
        pendingBody = nil
        isDirty = false
        if case .failure = result {
            head = nil
            body = nil
        }
        guard head != nil || body != nil || result != nil else { return }
        let handler = self.handler
        let events = UpstreamEvents(head: head, body: body, result: result)
        eventLoop.execute { handler.value.upstreamReceived(events) }
    }
}
