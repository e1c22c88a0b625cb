import Synchronization

/// A wall clock (seconds since 1970) that moves only when a test says: what the response cache
/// ages its entries by in tests, so that expiry is shown without waiting for it.
public final class ManualWallClock: Sendable {
    private let seconds: Mutex<Double>

    /// Starts at `start`: by default a fixed moment (2026-11-26 00:00:00 UTC).
    public init(start: Double = 1_795_651_200) {
        seconds = Mutex(start)
    }

    public var now: Double { seconds.withLock { $0 } }

    public func advance(by delta: Double) {
        seconds.withLock { $0 += delta }
    }

    /// The clock as the gateway takes it.
    public var function: @Sendable () -> Double { { [self] in now } }
}
