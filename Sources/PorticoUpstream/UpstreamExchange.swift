import NIOCore
import NIOHTTP1

/// One request through the NIO client, from `execute` to its one result: the ``UpstreamTask`` the
/// caller holds.
///
/// It owns the whole-exchange timeout (time spent waiting for a connection counts), decides on
/// the one retry a stale pooled connection earns, and delivers to the response handler; the pool
/// and the connection call into it, all on its event loop.
///
/// `@unchecked Sendable`: ``UpstreamTask`` must be `Sendable`, but every mutable field is touched on
/// `eventLoop` only. `cancel()` and `consumed(bytes:)` hop there when called from elsewhere (the
/// gateway calls them on the loop, so that costs nothing there).
final class UpstreamExchange: UpstreamTask, @unchecked Sendable {
    enum State {
        /// Made by `execute`, not yet handed to a pool (only while hopping onto the loop).
        case created
        /// Queued in (or being handed a connection by) its pool.
        case waiting
        case running(UpstreamConnectionHandler)
        /// The result was delivered, or the caller cancelled: nothing more is delivered.
        case finished
    }

    let eventLoop: any EventLoop
    let origin: UpstreamOrigin
    /// The request head's bytes (``UpstreamRequest/http1Head(for:)``).
    let head: ByteBuffer
    let body: ByteBuffer?
    let isHeadRequest: Bool
    /// The request did not say `Connection: close`.
    let keepAlive: Bool
    /// RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT and DELETE may be repeated.
    let isIdempotent: Bool
    let timeout: TimeAmount
    /// An event stream's longest wait for its next bytes (its head has come).
    let eventTimeout: TimeAmount
    let connectTimeout: TimeAmount
    /// Dropped once nothing more will be delivered (the result went out, or the caller cancelled).
    /// The caller keeps this task, usually in the very object the handler delivers to; holding the
    /// handler past the end would make a cycle that keeps both, and everything they hold, forever.
    private var handler: (any UpstreamResponseHandler)?

    private(set) var state = State.created
    var pool: UpstreamConnectionPool?
    /// The pool's number for this request while it waits.
    var poolRequestID = 0
    private var started = NIODeadline.uptimeNanoseconds(0)
    /// The whole-exchange deadline and this exchange's links in its pool's ``UpstreamDeadlines``.
    var deadline = NIODeadline.uptimeNanoseconds(0)
    var earlierDeadline: UpstreamExchange?
    var laterDeadline: UpstreamExchange?
    var isListed = false
    /// The list the deadline is in (its pool's).
    private var deadlines: UpstreamDeadlines?
    private var retried = false
    /// The answer is an event stream (``UpstreamResponseHead/isEventStream``): from its head on,
    /// `timeout` bounds each wait for the stream to move, not the whole exchange.
    private var streamsEvents = false
    /// A retry after a stale connection runs on a fresh one only.
    var needsFreshConnection: Bool { retried }
    private var newConnections = 0

    init(
        eventLoop: any EventLoop, origin: UpstreamOrigin, method: String, head: ByteBuffer, body: ByteBuffer?, keepAlive: Bool,
        timeout: Duration, connectTimeout: Duration, eventIdleTimeout: Duration? = nil, handler: any UpstreamResponseHandler
    ) {
        self.eventLoop = eventLoop
        self.origin = origin
        self.head = head
        self.body = body
        self.keepAlive = keepAlive
        self.isHeadRequest = method == "HEAD"
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": self.isIdempotent = true
        default: self.isIdempotent = false
        }
        self.timeout = TimeAmount(timeout)
        self.eventTimeout = TimeAmount(eventIdleTimeout ?? timeout)
        self.connectTimeout = TimeAmount(connectTimeout)
        self.handler = handler
    }

    // MARK: Start

    /// Arms the timeout and asks `pool` for a connection.
    func start(in pool: UpstreamConnectionPool) {
        guard case .created = state else { return }
        self.pool = pool
        state = .waiting
        armTimeout(in: pool.deadlines)
        pool.lease(self, fresh: false)
    }

    /// Starts the whole-exchange clock, on the loop's own time (so an `EmbeddedEventLoop` can move it).
    func armTimeout(in deadlines: UpstreamDeadlines) {
        started = eventLoop.now
        self.deadlines = deadlines
        deadlines.insert(self, deadline: started + timeout)
    }

    /// Fails an exchange that never reached a pool, on the next loop turn (never inside `execute`,
    /// whose caller does not hold the task yet).
    func failSoon(_ error: UpstreamError) {
        eventLoop.execute { [self] in
            guard case .created = state else { return }
            finish(.failure(error))
        }
    }

    // MARK: UpstreamTask

    func cancel() {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.cancel() }
            return
        }
        switch state {
        case .created:
            state = .finished
        case .waiting:
            state = .finished
            stopTimer()
            pool?.remove(self)
        case .running(let connection):
            state = .finished
            stopTimer()
            connection.cancel()
        case .finished:
            break
        }
        handler = nil
    }

    func consumed(bytes: Int) {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.consumed(bytes: bytes) }
            return
        }
        if case .running(let connection) = state {
            if streamsEvents { extendStream() }
            connection.consumed(bytes)
        }
    }

    // MARK: Calls from the pool

    /// Runs the request on `connection`. Returns false, with nothing sent, when the connection
    /// turned out to be closed; the pool then leases again.
    func run(on connection: UpstreamConnectionHandler) -> Bool {
        let fresh = connection.isFresh
        state = .running(connection)
        // The write may fail at once and retry re-entrantly, so the state is set first and not
        // touched after a successful start.
        guard connection.start(self) else {
            state = .waiting
            return false
        }
        if fresh { newConnections += 1 }
        return true
    }

    /// The request could not get a connection (the attempt failed, or the pool shut down).
    func failWaiting(_ error: UpstreamError) {
        guard case .waiting = state else { return }
        finish(.failure(error))
    }

    // MARK: Calls from the connection

    func received(_ events: UpstreamEvents) {
        guard case .running = state else { return }
        if events.head?.isEventStream == true { streamsEvents = true }
        if streamsEvents { extendStream() }
        handler?.upstreamReceived(events)
    }

    /// An event stream's clock: the timeout runs from its last delivery, or the client's last
    /// progress through it, instead of from the exchange's start.
    private func extendStream() {
        deadlines?.insert(self, deadline: eventLoop.now + eventTimeout)
    }

    func completed(_ events: consuming UpstreamEvents) {
        guard case .running = state else { return }
        var events = events
        events.result = .success(UpstreamMetrics(duration: Duration(eventLoop.now - started), newConnections: newConnections))
        state = .finished
        stopTimer()
        deliverLast(events)
    }

    func connectionFailed(_ error: UpstreamError, retry: UpstreamConnectionStateMachine.Retry) {
        guard case .running = state else { return }
        let retrying =
            switch retry {
            case .never: false
            case .ifIdempotent: isIdempotent && !retried
            }
        guard retrying, let pool else {
            finish(.failure(error))
            return
        }
        retried = true
        state = .waiting
        pool.lease(self, fresh: true)
    }

    // MARK: Timeout

    /// The whole-exchange timeout ran out (``UpstreamDeadlines`` has unlinked it already).
    func deadlinePassed() {
        let error = UpstreamError(
            .timedOut,
            detail: streamsEvents ? "no event within \(Duration(eventTimeout))" : "no complete response within \(Duration(timeout))")
        switch state {
        case .created, .waiting:
            // (Created: its clock was started before it reached a pool, which only tests do.)
            pool?.remove(self)
            finish(.failure(error))
        case .running(let connection):
            // The connection is mid-exchange: it closes and is never reused.
            state = .finished
            connection.cancel()
            deliverLast(UpstreamEvents(result: .failure(error)))
        case .finished:
            break
        }
    }

    private func stopTimer() {
        deadlines?.remove(self)
    }

    private func finish(_ result: Result<UpstreamMetrics, UpstreamError>) {
        state = .finished
        stopTimer()
        deliverLast(UpstreamEvents(result: result))
    }

    /// Delivers the events that carry the result, letting go of the handler first.
    private func deliverLast(_ events: UpstreamEvents) {
        let handler = self.handler
        self.handler = nil
        handler?.upstreamReceived(events)
    }
}
