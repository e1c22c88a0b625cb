import NIOHTTP1

/// What the connection's reads and writes depend on, decided by the machine so that its handler
/// only performs: when a read is held back (pipelining), when writes are flushed (once per read
/// batch), and how much response body a backend is still owed credit for.
extension ExchangeStateMachine {
    struct Flow {
        /// A read was asked for while pipelined parts waited; it is passed on once they are taken.
        var readHeld = false
        /// Pipelined parts are being handed over (an action performed meanwhile must not start
        /// handing them over again).
        var delivering = false
        /// Inside `channelRead`…`channelReadComplete`: writes wait for the batch's one flush.
        var readingBatch = false
        var flushPending = false
        /// Body bytes delivered by the upstream client and written, but not yet returned to it as
        /// credit because the channel was not writable; returned when it becomes writable.
        var unconsumedBytes = 0
    }

    enum ReadDecision {
        /// Pass the read on.
        case read
        /// Hold it until the waiting parts are taken, or drop it (the connection is closing).
        case hold
    }

    // MARK: Reads

    /// The outbound `read()`: while pipelined parts wait, the read is held back, so that the
    /// queue never holds more than one read's worth and TCP's window slows the client down.
    mutating func readRequested() -> ReadDecision {
        if isClosed { return .hold }
        guard pipelined.isEmpty else {
            flow.readHeld = true
            return .hold
        }
        return .read
    }

    /// A part arrived: whether the machine takes it now (then pass it to its event), or it waits
    /// behind the current exchange (it is queued).
    mutating func takesNow(_ part: HTTPServerRequestPart) -> Bool {
        flow.readingBatch = true
        guard pipelined.isEmpty && accepts(part) else {
            pipelined.append(.part(part))
            return false
        }
        return true
    }

    /// The decoder refused what follows: whether it can be answered now (then call
    /// ``parserErrorReceived(_:)``), or it waits behind the current exchange (it is queued).
    mutating func takesParserErrorNow(_ error: HTTPParserError) -> Bool {
        guard pipelined.isEmpty && acceptsParserError else {
            pipelined.append(.parserError(error))
            return false
        }
        return true
    }

    /// Begins handing over waiting parts; false if that is already under way further up the stack.
    mutating func deliveryBegins() -> Bool {
        guard !flow.delivering else { return false }
        flow.delivering = true
        return true
    }

    /// The next waiting part or parse error, if the machine can take it now.
    mutating func nextPipelined() -> PipelinedRequests.Event? {
        guard let event = pipelined.first else { return nil }
        switch event {
        case .part(let part): guard accepts(part) else { return nil }
        case .parserError: guard acceptsParserError else { return nil }
        }
        pipelined.removeFirst()
        return event
    }

    /// Whether parts wait, or a read is held back: after each action, the handler hands over
    /// what the machine can now take.
    var hasWaitingInput: Bool { !pipelined.isEmpty || flow.readHeld }

    /// Ends the hand-over: whether a held read is now passed on (nothing waits any more).
    mutating func deliveryEnds() -> Bool {
        flow.delivering = false
        guard pipelined.isEmpty && flow.readHeld else { return false }
        flow.readHeld = false
        return true
    }

    // MARK: Writes

    /// A write was made: whether to flush it now, or leave it to the read batch's end.
    mutating func wrote() -> Bool {
        guard flow.readingBatch else { return true }
        flow.flushPending = true
        return false
    }

    /// `channelReadComplete`: whether the batch's writes are to be flushed.
    mutating func readBatchEnded() -> Bool {
        flow.readingBatch = false
        return takePendingFlush()
    }

    /// The connection is about to close: whether writes are waiting for a flush (a socket drops
    /// unflushed writes when it closes).
    mutating func takePendingFlush() -> Bool {
        defer { flow.flushPending = false }
        return flow.flushPending
    }

    /// `bytes` of a backend's body were written to the client; the backend's credit for them is
    /// returned once they have left the channel (``creditDue()``).
    mutating func responseBodyWritten(bytes: Int) {
        flow.unconsumedBytes += bytes
    }

    /// The channel is writable: the exchange whose backend is owed credit, and how much.
    mutating func creditDue() -> (Exchange, Int)? {
        guard flow.unconsumedBytes > 0, let exchange = handlingExchange else { return nil }
        defer { flow.unconsumedBytes = 0 }
        return (exchange, flow.unconsumedBytes)
    }
}
