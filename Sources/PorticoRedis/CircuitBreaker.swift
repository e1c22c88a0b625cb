/// A circuit breaker over one event loop's Redis connection, so that a dead Redis does not add its
/// timeout to every request: after `failureThreshold` failures in a row it opens, and commands
/// fail at once for `openDuration`; then one command is let through as a probe (half-open), whose
/// success closes the breaker and whose failure opens it again.
///
/// A plain struct over an injected clock (monotonic nanoseconds), tested without a connection.
public struct CircuitBreaker: Sendable {
    public enum State: Int, Sendable {
        case closed = 0
        case open = 1
        case halfOpen = 2
    }

    public let failureThreshold: Int
    public let openNanos: Int64
    public private(set) var state = State.closed
    private var failures = 0
    private var openUntil: Int64 = 0
    private var probing = false

    public init(failureThreshold: Int = 5, openNanos: Int64 = 1_000_000_000) {
        self.failureThreshold = max(1, failureThreshold)
        self.openNanos = openNanos
    }

    /// Whether a command may be sent at `now`. In the half-open state only one probe is out at a
    /// time; the others fail fast as if open.
    public mutating func allow(now: Int64) -> Bool {
        switch state {
        case .closed:
            return true
        case .open:
            guard now >= openUntil else { return false }
            state = .halfOpen
            probing = true
            return true
        case .halfOpen:
            guard !probing else { return false }
            probing = true
            return true
        }
    }

    /// A reply came.
    public mutating func succeeded() {
        state = .closed
        failures = 0
        probing = false
    }

    /// A command failed (timeout, no connection, broken reply).
    public mutating func failed(now: Int64) {
        probing = false
        failures += 1
        if state == .halfOpen || failures >= failureThreshold {
            state = .open
            openUntil = now + openNanos
        }
    }
}
