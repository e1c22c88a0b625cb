import NIOCore

/// The life of one upstream HTTP/1.1 connection, as decisions without I/O.
///
/// ``UpstreamConnectionHandler`` feeds it what the channel reports and performs the ``Action`` each
/// event returns, so every rule here can be tested without a channel:
///
/// `idle → sendingRequest → awaitingHead → streamingBody → idle` when both sides allow keep-alive
/// and the response was framed; `→ closed` after anything else (a failure, a cancel, `Connection:
/// close`, a body that ends by close). A closed connection never comes back.
///
/// Two further duties live here because they depend on the same state:
/// - **Coalescing.** Head and body parts are held until `channelReadComplete`, then handed over in
///   one delivery, so the gateway writes and flushes once per read batch rather than per part.
///   Held events of a failed exchange are dropped: if the head was never delivered, the exchange
///   fails cleanly and the gateway can still answer 502 instead of a truncated 200.
/// - **Back-pressure.** The channel reads only on request (auto-read is off). After each batch a
///   read is issued only while the bytes delivered but not yet consumed stay under the high
///   watermark; ``consumed(_:)`` bringing them down to the low watermark issues the read again.
///   An idle pooled connection always has a read pending, so a backend's close (or stray bytes)
///   is noticed at once and such a connection is never handed out.
struct UpstreamConnectionStateMachine {
    enum State: Equatable {
        case idle
        /// The request is being written; nothing of the response has arrived.
        case sendingRequest
        /// The request is on the wire; the response head is awaited.
        case awaitingHead
        /// The head arrived (possibly while the request was still being written); body and end follow.
        case streamingBody
        case closed
    }

    /// When a failed exchange may run again on another connection.
    enum Retry: Equatable {
        case never
        /// The backend may have seen the request: only a method that may be repeated (RFC 9110
        /// §9.2.2) runs again.
        case ifIdempotent
    }

    enum Action {
        case none
        /// Write the request; issue a read as well when `read` (none is pending yet).
        case writeRequest(read: Bool)
        /// The connection cannot take an exchange (it is not idle); nothing was sent.
        case unavailable
        case read
        /// Hand these events to the exchange; issue a read first when `read`.
        case deliver(UpstreamEvents, read: Bool)
        /// The response is complete: park the connection in the pool (`reuse`, with a read pending)
        /// or close it, then hand the last events to the exchange with its result.
        case finish(UpstreamEvents, reuse: Bool)
        /// The exchange failed: close the connection, drop anything held, report `error`.
        case fail(UpstreamError, retry: Retry)
        /// Close the connection without telling anyone (a cancelled exchange, an idle connection
        /// that received something).
        case close
        /// The connection closed while idle: the pool forgets it.
        case forget
    }

    let highWatermark: Int
    let lowWatermark: Int

    private(set) var state = State.idle
    /// Exchanges started on this connection; a second one means it is being reused.
    private(set) var exchangesStarted = 0
    private(set) var readPending = false
    /// Body bytes delivered and not yet consumed.
    private(set) var outstanding = 0
    private var paused = false

    // The current exchange.
    private(set) var isHeadRequest = false
    private var requestSent = false
    private var headReceived = false
    /// Interim (1xx) heads of the current response so far (``ResponseFraming/interim(status:count:)``).
    private var interimResponses = 0
    private var responseComplete = false
    /// Both sides allow keep-alive and the response's length is known from its framing.
    private var reusable = false
    /// A small response is held, head included, until it is complete, as on the libcurl path
    /// (``ResponseFraming/heldBodyLimit``): a short or overlong body then fails before anything was
    /// delivered, and the gateway answers 502 rather than closing a started response.
    private var holdingResponse = false
    private var pendingHead: UpstreamResponseHead?
    private var pendingBody: ByteBuffer?

    init(highWatermark: Int = 256 * 1024, lowWatermark: Int = 64 * 1024) {
        precondition(lowWatermark < highWatermark, "the low watermark must be under the high one")
        self.highWatermark = highWatermark
        self.lowWatermark = lowWatermark
    }

    /// Whether the connection had served an exchange before the current one.
    var isReused: Bool { exchangesStarted > 1 }

    // MARK: The request

    /// - Parameters:
    ///   - isHeadRequest: a `HEAD` response has no body whatever its framing fields say.
    ///   - keepAlive: the request allows keep-alive (it did not say `Connection: close`).
    mutating func startExchange(isHeadRequest: Bool, keepAlive: Bool) -> Action {
        guard state == .idle else { return .unavailable }
        exchangesStarted += 1
        state = .sendingRequest
        self.isHeadRequest = isHeadRequest
        reusable = keepAlive
        requestSent = false
        headReceived = false
        interimResponses = 0
        responseComplete = false
        holdingResponse = false
        outstanding = 0
        paused = false
        let read = !readPending
        readPending = true
        return .writeRequest(read: read)
    }

    mutating func requestWritten() -> Action {
        switch state {
        case .sendingRequest:
            state = .awaitingHead
            requestSent = true
        case .streamingBody:
            requestSent = true
        case .idle, .awaitingHead, .closed:
            break
        }
        return .none
    }

    /// Whether the current request may still be on its way out (the handler then watches the
    /// channel's outbound buffer and calls ``requestWritten()`` once it is empty).
    var isWritingRequest: Bool { isInExchange && !requestSent }

    // MARK: The response

    /// An interim (1xx) head: dropped, or refused (``ResponseFraming/interim(status:count:)``).
    mutating func interimReceived(status: Int) -> Action {
        switch state {
        case .sendingRequest, .awaitingHead:
            interimResponses += 1
            if case .failure(let error) = ResponseFraming.interim(status: status, count: interimResponses) {
                return failure(transport: false, detail: error.detail)
            }
            return .none  // dropped; the final head follows
        case .streamingBody:
            return failure(transport: false, detail: "an interim response arrived after the final head")
        case .idle:
            state = .closed
            return .close
        case .closed:
            return .none
        }
    }

    /// The final head, with its framing as the decoder read it (``ResponseFraming``: the same rules
    /// as the libcurl path, so the receiver forwards only the checked length) and whether the
    /// backend allows keep-alive.
    mutating func headReceived(_ head: UpstreamResponseHead, framing: ResponseFraming, keepAlive: Bool) -> Action {
        switch state {
        case .sendingRequest, .awaitingHead:
            state = .streamingBody
            headReceived = true
            holdingResponse = framing.isHeldBack
            // A body that ends by close leaves nothing to reuse; any other end is known from the framing.
            reusable = reusable && keepAlive && framing.body != .untilClose
            pendingHead = head
            return .none
        case .streamingBody:
            return failure(transport: false, detail: "a second response head arrived for one request")
        case .idle:
            state = .closed
            return .close
        case .closed:
            return .none
        }
    }

    mutating func bodyReceived(_ part: ByteBuffer) -> Action {
        switch state {
        case .streamingBody where !responseComplete:
            if pendingBody == nil {
                pendingBody = part
            } else {
                var part = part
                pendingBody!.writeBuffer(&part)
            }
            return .none
        case .closed:
            return .none
        case .idle:
            state = .closed
            return .close
        case .sendingRequest, .awaitingHead, .streamingBody:
            return failure(transport: false, detail: "body bytes arrived outside a response")
        }
    }

    mutating func endReceived() -> Action {
        switch state {
        case .streamingBody where !responseComplete:
            responseComplete = true
            return .none
        case .closed:
            return .none
        case .idle:
            state = .closed
            return .close
        case .sendingRequest, .awaitingHead, .streamingBody:
            return failure(transport: false, detail: "a response ended that had not begun")
        }
    }

    /// The end of a read batch: deliver what it brought, and decide whether to read on.
    mutating func readComplete() -> Action {
        readPending = false
        switch state {
        case .idle:
            // Keep watching a pooled connection, so a close by the backend is seen at once.
            readPending = true
            return .read
        case .closed:
            return .none
        case .sendingRequest, .awaitingHead, .streamingBody:
            if responseComplete { return finish(closing: false) }
            if holdingResponse {
                // At most the hold-back bound is held: keep reading until the response is whole.
                readPending = true
                return .read
            }
            let events = takePending()
            if let body = events.body { outstanding += body.readableBytes }
            var read = false
            if outstanding >= highWatermark {
                paused = true
            } else {
                readPending = true
                read = true
            }
            guard events.head != nil || events.body != nil else { return read ? .read : .none }
            return .deliver(events, read: read)
        }
    }

    /// The consumer wrote `bytes` of delivered body onwards.
    mutating func consumed(_ bytes: Int) -> Action {
        outstanding = max(0, outstanding - bytes)
        guard paused, outstanding <= lowWatermark else { return .none }
        paused = false
        guard isInExchange, !readPending else { return .none }
        readPending = true
        return .read
    }

    // MARK: The end of the connection

    mutating func channelInactive() -> Action {
        readPending = false
        switch state {
        case .idle:
            state = .closed
            return .forget
        case .closed:
            return .none
        case .sendingRequest, .awaitingHead, .streamingBody:
            // A body that ends by close was completed by the decoder before this event.
            if responseComplete { return finish(closing: true) }
            let detail =
                headReceived
                ? "the backend closed the connection in the middle of the response"
                : "the backend closed the connection without answering"
            return failure(transport: true, detail: detail)
        }
    }

    /// Bytes from the backend that are not the response expected (``HTTP1ResponseDecoder``): a
    /// response under way fails and is never retried; on an idle connection they are a backend out
    /// of step, and the connection closes.
    mutating func responseInvalid(_ error: UpstreamError) -> Action {
        switch state {
        case .idle:
            state = .closed
            return .close
        case .closed:
            return .none
        case .sendingRequest, .awaitingHead, .streamingBody:
            return failure(transport: false, detail: error.detail)
        }
    }

    /// An error from the channel.
    mutating func errorCaught(_ error: any Error) -> Action {
        switch state {
        case .idle:
            state = .closed
            return .close
        case .closed:
            return .none
        case .sendingRequest, .awaitingHead, .streamingBody:
            let transport = error is IOError || error is ChannelError
            let detail =
                transport ? "the connection to the backend failed: \(error)" : "the backend's response is not valid HTTP/1.1: \(error)"
            return failure(transport: transport, detail: detail)
        }
    }

    /// The exchange was abandoned (or timed out): the connection closes and nothing is delivered.
    mutating func cancel() -> Action {
        guard isInExchange else { return .none }
        state = .closed
        dropPending()
        return .close
    }

    /// The client is shutting down: an exchange in flight fails, an idle connection just closes.
    mutating func shutdown() -> Action {
        switch state {
        case .idle:
            state = .closed
            return .close
        case .closed:
            return .none
        case .sendingRequest, .awaitingHead, .streamingBody:
            return fail(UpstreamError(.shutdown, detail: "upstream client shut down"), retry: .never)
        }
    }

    // MARK: Helpers

    private var isInExchange: Bool {
        switch state {
        case .sendingRequest, .awaitingHead, .streamingBody: true
        case .idle, .closed: false
        }
    }

    private mutating func finish(closing: Bool) -> Action {
        let events = takePending()
        // An answer that arrived before the whole request was written (a backend refusing a large
        // upload early, say) leaves unsent request bytes behind: such a connection is not reused.
        let reuse = !closing && reusable && requestSent
        state = reuse ? .idle : .closed
        if reuse { readPending = true }
        return .finish(events, reuse: reuse)
    }

    /// A failure of the transport (reset, close) may be retried when nothing of a response came back
    /// on a connection that had served before (it was most likely closed by the backend while idle);
    /// a response that breaks HTTP is never retried.
    private mutating func failure(transport: Bool, detail: String) -> Action {
        let retry: Retry = transport && !headReceived && isReused ? .ifIdempotent : .never
        return fail(UpstreamError(.badResponse, detail: detail), retry: retry)
    }

    private mutating func fail(_ error: UpstreamError, retry: Retry) -> Action {
        state = .closed
        dropPending()
        return .fail(error, retry: retry)
    }

    /// Moved out, not copied: a copy of the head and body is a retain and a release of each.
    private mutating func takePending() -> UpstreamEvents {
        UpstreamEvents(head: pendingHead.take(), body: pendingBody.take())
    }

    private mutating func dropPending() {
        pendingHead = nil
        pendingBody = nil
    }
}
