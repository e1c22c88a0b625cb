/// When the next connection attempt may be made: at once at first, then after a delay that
/// doubles with each failed attempt (a connection refused, closed, or reset after a timeout) up to
/// `maximumNanos`, and back to nothing once Redis answers on a connection (``connected()``: a
/// connection made is not enough, since a frozen Redis's kernel still accepts them).
/// Commands that arrive while waiting fail at once (``RedisError/unavailable``) rather than queue.
public struct ReconnectBackoff: Sendable {
    public let initialNanos: Int64
    public let maximumNanos: Int64
    private var delay: Int64 = 0
    public private(set) var notBefore: Int64 = .min

    public init(initialNanos: Int64 = 50_000_000, maximumNanos: Int64 = 2_000_000_000) {
        self.initialNanos = initialNanos
        self.maximumNanos = maximumNanos
    }

    public func mayAttempt(now: Int64) -> Bool { now >= notBefore }

    public mutating func attemptFailed(now: Int64) {
        delay = delay == 0 ? initialNanos : min(maximumNanos, delay * 2)
        notBefore = now + delay
    }

    public mutating func connected() {
        delay = 0
        notBefore = .min
    }
}
