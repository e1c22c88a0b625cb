/// Decides which timer guards a connection at each point of its life, and what happens when it fires.
///
/// Kept apart from the channel handler so it can be tested without a channel: each event returns an
/// ``Action`` that the handler performs.
///
/// - `idle`: between requests; the keep-alive idle timer runs and closes the connection quietly.
/// - `readingHead`: a request's first byte arrived; the head timer runs from that byte (a deadline,
///   not reset by further bytes, so a client dribbling one byte at a time cannot hold on).
/// - `readingBody`: the head is in and a body is expected; the same timeout applies to each pause
///   between body bytes.
/// - `draining`: the request was answered before its body arrived, and the rest of a small body is
///   read and dropped; it must arrive within the head timeout from the answer (a deadline, as for
///   the head), or the connection closes.
/// - `handling`: the request is complete; the gateway owns the clock (upstream timeouts).
struct ConnectionTimeoutStateMachine {
    enum State: Equatable {
        case idle
        case readingHead
        case readingBody
        case draining
        /// `sawMoreBytes`: bytes of a pipelined request arrived while this one was being handled.
        case handling(sawMoreBytes: Bool)
        case closed
    }

    enum Timer: Equatable {
        case idle
        case head
    }

    enum Action: Equatable {
        case none
        case cancelTimer
        case startTimer(Timer)
        /// Close without a response (idle keep-alive connection).
        case close
        /// Answer 408 and close (a request was being received).
        case respondTimeoutAndClose
    }

    private(set) var state: State = .idle

    /// The connection became active: wait for its first request.
    mutating func connectionOpened() -> Action {
        state = .idle
        return .startTimer(.idle)
    }

    mutating func bytesReceived() -> Action {
        switch state {
        case .idle:
            state = .readingHead
            return .startTimer(.head)
        case .readingBody:
            return .startTimer(.head)
        case .handling:
            state = .handling(sawMoreBytes: true)
            return .none
        case .readingHead, .draining, .closed:
            return .none
        }
    }

    /// The request was answered early and the rest of its body is being read and dropped.
    mutating func drainStarted() -> Action {
        guard state == .readingBody else { return .none }
        state = .draining
        return .startTimer(.head)
    }

    mutating func requestHeadReceived(expectsBody: Bool) -> Action {
        guard state != .closed else { return .none }
        if expectsBody {
            state = .readingBody
            return .startTimer(.head)
        }
        state = .handling(sawMoreBytes: false)
        return .cancelTimer
    }

    mutating func requestEndReceived() -> Action {
        guard state != .closed else { return .none }
        if case .handling = state { return .none }
        state = .handling(sawMoreBytes: false)
        return .cancelTimer
    }

    mutating func responseEndSent() -> Action {
        switch state {
        case .handling(sawMoreBytes: true):
            // Part of the next request is already buffered: its head deadline starts now.
            state = .readingHead
            return .startTimer(.head)
        case .handling(sawMoreBytes: false):
            state = .idle
            return .startTimer(.idle)
        default:
            // An early answer (the body is still arriving); the read timers keep running.
            return .none
        }
    }

    mutating func timerFired() -> Action {
        switch state {
        case .idle, .draining:
            // Idle: nothing is owed. Draining: the answer has been sent already.
            state = .closed
            return .close
        case .readingHead, .readingBody:
            state = .closed
            return .respondTimeoutAndClose
        case .handling, .closed:
            return .none
        }
    }

    mutating func connectionClosed() -> Action {
        state = .closed
        return .cancelTimer
    }
}
