import NIOCore

/// Decides which timers guard a connection at each point of its life, and what happens when one fires.
///
/// Kept apart from the channel handler so it can be tested without a channel: each event returns an
/// ``Action`` that the handler performs.
///
/// Two timers, independent of each other:
///
/// The **read timer** follows the request being received (``state``):
/// - `idle`: between requests; the keep-alive idle timer runs and closes the connection quietly.
/// - `readingHead`: a request's first byte arrived; the head timer runs from that byte (a deadline,
///   not reset by further bytes, so a client dribbling one byte at a time cannot hold on).
/// - `readingBody`: the head is in and a body is expected; the same timeout applies to each pause
///   between body bytes, and, with a minimum body rate, the body must also keep up with it once the
///   grace period has passed: it is due by `head + grace + received / rate` (mod_reqtimeout's
///   `MinRate`), so a client dribbling a byte within every pause cannot hold the connection for ever.
/// - `draining`: the request was answered before its body arrived, and the rest of a small body is
///   read and dropped; it must arrive within the head timeout from the answer (a deadline, as for
///   the head), or the connection closes.
/// - `handling`: the request is complete; the gateway owns the clock (upstream timeouts).
///
/// The **send timer** runs while response bytes wait to be written (``sending``), whatever the read
/// side is doing: a client that stops reading would otherwise pin the connection, its pending bytes
/// and its descriptor for ever (flow control stops the backend, so nothing else ever ends the
/// exchange). Each completed flush, and the channel becoming writable again, is progress and
/// restarts it; when it fires the connection is closed at once, since nothing queued (a TLS
/// close_notify included) would ever reach such a client.
struct ConnectionTimeoutStateMachine {
    enum State: Equatable {
        case idle
        case readingHead
        case readingBody(BodyProgress)
        case draining
        /// `sawMoreBytes`: bytes of a pipelined request arrived while this one was being handled.
        case handling(sawMoreBytes: Bool)
        case closed
    }

    /// A body being received: since when, and how much of it.
    struct BodyProgress: Equatable {
        var started: NIODeadline
        var received: Int
    }

    /// Where the connection's outbound bytes stand.
    enum Sending: Equatable {
        /// Every flush handed down has completed (all its writes have left).
        case caughtUp
        /// `flushes` flushes were handed down and have not completed yet. Flushes, not writes: the
        /// handler watches the last write of each flush only (writes complete in order).
        case waiting(flushes: Int)
        /// The connection is gone; late flush completions change nothing.
        case closed
    }

    enum Timer: Equatable {
        /// The read timer, as the keep-alive idle timeout.
        case idle
        /// The read timer, as the head timeout (a deadline from the head's first byte, or from an
        /// early answer while a body is drained).
        case head
        /// The read timer while a body arrives: the pause timeout from now, or `notAfter` if that is
        /// sooner (the minimum rate's deadline; nil without one).
        case body(notAfter: NIODeadline?)
        /// The send timer: no write progress for the send timeout.
        case send
    }

    enum Action: Equatable {
        case none
        /// Stops the read timer.
        case cancelTimer
        /// Starts the given timer from now (for `.idle`/`.head` it replaces the read timer's deadline).
        case startTimer(Timer)
        /// Stops the send timer: nothing waits to be written.
        case cancelSendTimer
        /// Stops both timers: the connection is gone.
        case stopTimers
        /// Close without a response (idle keep-alive connection).
        case close
        /// Answer 408 and close (a request was being received).
        case respondTimeoutAndClose
        /// Close at once, dropping whatever is unwritten and skipping TLS's close_notify.
        case closeImmediately
    }

    private(set) var state: State = .idle
    private(set) var sending: Sending = .caughtUp
    /// Bytes per second a body must keep up with after the grace period; 0: no minimum.
    private let minBodyRate: Int
    private let bodyGrace: TimeAmount

    /// - Parameters:
    ///   - minBodyRate: `limits.minBodyRate`, bytes per second; 0 turns the rate check off.
    ///   - bodyGrace: how long a body may take before the rate applies (the head timeout).
    init(minBodyRate: Int = 0, bodyGrace: TimeAmount = .zero) {
        self.minBodyRate = minBodyRate
        self.bodyGrace = bodyGrace
    }

    /// The connection became active: wait for its first request.
    mutating func connectionOpened() -> Action {
        state = .idle
        return .startTimer(.idle)
    }

    /// `count` bytes arrived at `now`.
    mutating func bytesReceived(_ count: Int, now: NIODeadline) -> Action {
        switch state {
        case .idle:
            state = .readingHead
            return .startTimer(.head)
        case .readingBody(var progress):
            progress.received += count
            state = .readingBody(progress)
            return .startTimer(.body(notAfter: bodyDeadline(progress)))
        case .handling:
            state = .handling(sawMoreBytes: true)
            return .none
        case .readingHead, .draining, .closed:
            return .none
        }
    }

    /// The request was answered early and the rest of its body is being read and dropped.
    mutating func drainStarted() -> Action {
        guard case .readingBody = state else { return .none }
        state = .draining
        return .startTimer(.head)
    }

    mutating func requestHeadReceived(expectsBody: Bool, now: NIODeadline) -> Action {
        guard state != .closed else { return .none }
        if expectsBody {
            let progress = BodyProgress(started: now, received: 0)
            state = .readingBody(progress)
            return .startTimer(.body(notAfter: bodyDeadline(progress)))
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

    /// When a body that has brought `progress.received` bytes so far must be whole at the minimum
    /// rate: the grace period, plus a second for every `minBodyRate` bytes received.
    private func bodyDeadline(_ progress: BodyProgress) -> NIODeadline? {
        guard minBodyRate > 0 else { return nil }
        let earned = Int64(progress.received).multipliedReportingOverflow(by: 1_000_000_000)
        let allowance = earned.overflow ? Int64.max / 2 : earned.partialValue / Int64(minBodyRate)
        return progress.started + bodyGrace + .nanoseconds(allowance)
    }

    /// The read timer expired.
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

    // MARK: Sending

    /// Writes were flushed towards the socket. The first flush to wait starts the send timer;
    /// later ones leave it alone (only progress moves it).
    mutating func flushQueued() -> Action {
        switch sending {
        case .caughtUp:
            sending = .waiting(flushes: 1)
            return .startTimer(.send)
        case .waiting(let flushes):
            sending = .waiting(flushes: flushes + 1)
            return .none
        case .closed:
            return .none
        }
    }

    /// A flush's writes completed (written, or failed because the channel closed): progress.
    mutating func flushCompleted() -> Action {
        switch sending {
        case .waiting(let flushes) where flushes > 1:
            sending = .waiting(flushes: flushes - 1)
            return .startTimer(.send)
        case .waiting:
            sending = .caughtUp
            return .cancelSendTimer
        case .caughtUp, .closed:
            return .none
        }
    }

    /// The channel's outbound buffer fell below its low-water mark: bytes did move, even if no
    /// flush has completed yet (a large one is written in pieces).
    mutating func becameWritable() -> Action {
        guard case .waiting = sending else { return .none }
        return .startTimer(.send)
    }

    /// The send timer expired: bytes have been waiting with no progress for the send timeout.
    mutating func sendTimerFired() -> Action {
        guard case .waiting = sending else { return .none }
        state = .closed
        sending = .closed
        return .closeImmediately
    }

    mutating func connectionClosed() -> Action {
        state = .closed
        sending = .closed
        return .stopTimers
    }
}
