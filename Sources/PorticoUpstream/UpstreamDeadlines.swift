import NIOCore

/// The whole-exchange deadlines of one pool's requests, behind one timer.
///
/// Arming and cancelling a NIO timer per request costs a scheduled-task heap insert and removal,
/// each moving values whose copies retain and release: a profile of the NIO client under load put
/// several per cent of its CPU there. Here a request's deadline is a link in a list kept in
/// deadline order, and one timer waits for the earliest. Requests of one pool nearly always share
/// one timeout, so a new deadline is the latest and is appended in constant time; a finished
/// request unlinks itself in constant time; and the timer is moved only when it fires (or when a
/// new deadline is earlier than every other), never per request.
///
/// Confined to the pool's event loop; time is `eventLoop.now`, so tests move it on an
/// `EmbeddedEventLoop`.
final class UpstreamDeadlines: NIOScheduledCallbackHandler {
    private let eventLoop: any EventLoop
    private var first: UpstreamExchange?
    private var last: UpstreamExchange?
    private var timer: NIOScheduledCallback?
    /// When the timer is set to fire; nil when none is set.
    private var timerDeadline: NIODeadline?
    /// How many deadlines are listed, for tests.
    private(set) var count = 0

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Lists `exchange` to be told ``UpstreamExchange/deadlinePassed()`` at `deadline`.
    func insert(_ exchange: UpstreamExchange, deadline: NIODeadline) {
        remove(exchange)
        exchange.deadline = deadline
        // From the back: a new deadline is almost always the latest.
        var before = last
        while let candidate = before, candidate.deadline > deadline { before = candidate.earlierDeadline }
        exchange.earlierDeadline = before
        exchange.laterDeadline = before == nil ? first : before?.laterDeadline
        if let before { before.laterDeadline = exchange } else { first = exchange }
        if let later = exchange.laterDeadline { later.earlierDeadline = exchange } else { last = exchange }
        exchange.isListed = true
        count += 1
        if timerDeadline.map({ deadline < $0 }) ?? true { schedule(at: deadline) }
    }

    /// Unlinks `exchange` (it finished, or was cancelled); does nothing if it is not listed. The
    /// timer stays where it is, even with the list empty: if it fires early it finds nothing due
    /// and waits for the next deadline, which costs one wake-up per timeout period instead of a
    /// timer cancelled and set again per request when requests come one at a time.
    func remove(_ exchange: UpstreamExchange) {
        guard exchange.isListed else { return }
        if let earlier = exchange.earlierDeadline { earlier.laterDeadline = exchange.laterDeadline } else { first = exchange.laterDeadline }
        if let later = exchange.laterDeadline { later.earlierDeadline = exchange.earlierDeadline } else { last = exchange.earlierDeadline }
        exchange.earlierDeadline = nil
        exchange.laterDeadline = nil
        exchange.isListed = false
        count -= 1
    }

    func handleScheduledCallback(eventLoop: some EventLoop) {
        timer = nil
        timerDeadline = nil
        let now = self.eventLoop.now
        while let due = first, due.deadline <= now {
            remove(due)
            due.deadlinePassed()
        }
        if let next = first { schedule(at: next.deadline) }
    }

    private func schedule(at deadline: NIODeadline) {
        timer?.cancel()
        timer = try? eventLoop.assumeIsolated().scheduleCallback(at: deadline, handler: self)
        timerDeadline = deadline
    }
}
