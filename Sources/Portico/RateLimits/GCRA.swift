import PorticoPolicy

/// A rate limit in the integers the Generic Cell Rate Algorithm computes with.
///
/// GCRA (ITU-T I.371) keeps one number per bucket, the *theoretical arrival time* (TAT): the
/// moment the bucket would be empty of debt had every admitted request arrived exactly on
/// schedule. A request at `now` is admitted when `TAT − now ≤ τ`, where the emission interval
/// `T = period / count` and the tolerance `τ = (burst − 1) · T`; admitting it moves TAT to
/// `max(TAT, now) + T`. Over any interval of length `d` it admits at most `burst + d / T` requests:
/// there are no window boundaries at which twice the rate could pass.
///
/// `T` is rarely a whole number of nanoseconds (`7/m` is 8 571 428 571.43 ns), so times are kept
/// exactly as `nanoseconds + fraction / count`, and comparisons are made in units of `1/count` ns.
/// The policy bounds `burst ≤ 10⁶` and `period ≤ 1 h`, so every product below stays under 4·10¹⁸.
public struct GCRALimit: Sendable, Hashable {
    /// Requests per period.
    public let count: Int64
    public let periodNanos: Int64
    public let burst: Int64

    public init(count: Int64, periodNanos: Int64, burst: Int64) {
        precondition(count > 0 && periodNanos > 0 && burst > 0, "a rate limit needs a positive count, period and burst")
        self.count = count
        self.periodNanos = periodNanos
        self.burst = burst
    }

    public init(_ policy: RateLimitPolicy) {
        self.init(count: Int64(policy.count), periodNanos: policy.period.nanoseconds, burst: Int64(policy.burst))
    }

    /// τ in units of `1/count` ns: `(burst − 1) · T · count = (burst − 1) · period`.
    var scaledTolerance: Int64 { (burst - 1) * periodNanos }
}

/// What the limiter decided about one request, and what the `RateLimit` header reports.
public struct RateLimitDecision: Sendable, Equatable {
    public var allowed: Bool
    /// Requests that would still be admitted right now, after this one.
    public var remaining: Int64
    /// Nanoseconds until the bucket holds no debt (a full burst is available again).
    public var resetNanos: Int64
    /// When refused: nanoseconds until one request would be admitted; zero when allowed.
    public var retryAfterNanos: Int64

    public init(allowed: Bool, remaining: Int64, resetNanos: Int64, retryAfterNanos: Int64) {
        self.allowed = allowed
        self.remaining = remaining
        self.resetNanos = resetNanos
        self.retryAfterNanos = retryAfterNanos
    }
}

/// One bucket's state: its theoretical arrival time, exact to `1/count` of a nanosecond, and the
/// limit it is kept under (a reload that changes the limit starts the bucket afresh).
public struct GCRAState: Sendable {
    public let limit: GCRALimit
    private var tatNanos: Int64
    /// In `0 ..< limit.count`.
    private var tatFraction: Int64 = 0
    /// The latest time this bucket has been asked at.
    private var latest: Int64

    public init(limit: GCRALimit, now: Int64) {
        self.limit = limit
        self.tatNanos = now
        self.latest = now
    }

    /// Admits or refuses one request arriving at `now` (monotonic nanoseconds).
    ///
    /// Callers read the clock before they take the bucket's lock, so a thread preempted in between
    /// arrives with an older `now` than one that came after it; the bucket uses the latest time it
    /// has seen instead, or such a request would look early by the preemption and be refused.
    public mutating func acquire(now reported: Int64) -> RateLimitDecision {
        let now = max(reported, latest)
        latest = now
        if tatNanos < now {
            tatNanos = now
            tatFraction = 0
        }
        // What is owed at `now`, in units of 1/count ns.
        let debt = (tatNanos - now) * limit.count + tatFraction
        let tolerance = limit.scaledTolerance
        guard debt <= tolerance else {
            return RateLimitDecision(
                allowed: false, remaining: 0, resetNanos: Self.nanos(debt, limit), retryAfterNanos: Self.nanos(debt - tolerance, limit))
        }
        let (step, stepFraction) = limit.periodNanos.quotientAndRemainder(dividingBy: limit.count)
        tatNanos += step
        tatFraction += stepFraction
        if tatFraction >= limit.count {
            tatFraction -= limit.count
            tatNanos += 1
        }
        let owed = debt + limit.periodNanos
        let remaining = owed > tolerance ? 0 : (tolerance - owed) / limit.periodNanos + 1
        return RateLimitDecision(allowed: true, remaining: remaining, resetNanos: Self.nanos(owed, limit), retryAfterNanos: 0)
    }

    /// What ``acquire(now:)`` would decide at `now`, leaving the bucket as it is.
    public func peek(now: Int64) -> RateLimitDecision {
        var copy = self
        return copy.acquire(now: now)
    }

    /// Whether the bucket owes nothing at `now`: then it behaves exactly like a new one, and can be
    /// forgotten without changing any decision.
    public func isIdle(at now: Int64) -> Bool {
        tatNanos < now || (tatNanos == now && tatFraction == 0)
    }

    /// When the bucket becomes idle, for choosing what to evict first.
    var idleFrom: Int64 { tatNanos }

    /// Scaled units rounded up to whole nanoseconds.
    private static func nanos(_ scaled: Int64, _ limit: GCRALimit) -> Int64 {
        (scaled + limit.count - 1) / limit.count
    }
}
