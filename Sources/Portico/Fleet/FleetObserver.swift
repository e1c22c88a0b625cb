import Logging
import NIOConcurrencyHelpers
import PorticoRedis

/// What fleet mode's Redis client reports: counted in the metrics (``RedisMetrics``), and told to
/// the operator when it matters. A breaker opening is logged once, with the failure that opened
/// it (a timeout, `-READONLY`, a certificate that does not verify…), and its closing once more;
/// single failures are only counted, so a dead Redis cannot flood the log.
///
/// Called on the event loops; the last failure is kept under a lock, taken only on failures.
final class FleetObserver: RedisObserver {
    private let metrics: RedisMetrics?
    private let logger: Logger?
    private let lastFailure = NIOLockedValueBox<RedisError?>(nil)

    init(metrics: RedisMetrics?, logger: Logger?) {
        self.metrics = metrics
        self.logger = logger
    }

    func replied(afterNanos nanos: Int64) { metrics?.replied(afterNanos: nanos) }

    func failed(_ error: RedisError) {
        metrics?.failed(error)
        // `circuit_open` and `unavailable` (no connection during the backoff) follow from an
        // earlier failure; the one that explains is kept, unless there is no other.
        lastFailure.withLockedValue { last in
            if error != .circuitOpen, error != .unavailable || last == nil { last = error }
        }
    }

    func breakerChanged(from old: CircuitBreaker.State, to new: CircuitBreaker.State) {
        metrics?.breakerChanged(from: old, to: new)
        if old == .closed, new == .open {
            let reason = lastFailure.withLockedValue { $0 }.map { "\($0)" } ?? "unknown"
            logger?.warning(
                "Redis is failing: an event loop's circuit breaker opened; requests get cluster.onFailure's answer",
                metadata: ["error": .string(reason)])
        } else if old != .closed, new == .closed {
            logger?.notice("Redis answers again: an event loop's circuit breaker closed")
        }
    }

    func connected() { metrics?.connected() }

    func disconnected(_ reason: RedisError) {
        metrics?.disconnected(reason)
        logger?.debug("closed the Redis connection", metadata: ["reason": .string("\(reason)")])
    }
}
