import CoreMetrics
import PorticoRedis
import Prometheus

/// Fleet mode's Redis metrics: reply latency (a histogram with buckets fine enough for a loopback
/// round trip), failures by reason, connections made and closed by the client, and how many event
/// loops' breakers are not closed.
final class RedisMetrics: RedisObserver {
    /// Reasons are ``RedisError/label``'s fixed list.
    static let reasons = ["timeout", "unavailable", "connection_closed", "protocol", "circuit_open", "error_reply", "tls"]

    let histograms: AtomicDurationHistograms
    private let latency: CoreMetrics.Timer
    private let failures: [String: CoreMetrics.Counter]
    private let breakersOpen: CoreMetrics.Meter
    private let connects: CoreMetrics.Counter
    private let resets: CoreMetrics.Counter

    init(registry: PrometheusCollectorRegistry) {
        histograms = AtomicDurationHistograms(bounds: [
            .microseconds(50), .microseconds(100), .microseconds(200), .microseconds(500), .milliseconds(1), .milliseconds(2),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        ])
        let factory = GatewayMetricsFactory(prometheus: PrometheusMetricsFactory(registry: registry), histograms: histograms)
        latency = CoreMetrics.Timer(label: "portico_redis_duration_seconds", dimensions: [], factory: factory)
        failures = Dictionary(
            uniqueKeysWithValues: Self.reasons.map {
                ($0, CoreMetrics.Counter(label: "portico_redis_errors_total", dimensions: [("reason", $0)], factory: factory))
            })
        breakersOpen = CoreMetrics.Meter(label: "portico_redis_breakers_open", dimensions: [], factory: factory)
        breakersOpen.set(0)
        connects = CoreMetrics.Counter(label: "portico_redis_connections_total", dimensions: [], factory: factory)
        resets = CoreMetrics.Counter(label: "portico_redis_resets_total", dimensions: [], factory: factory)
    }

    func connected() { connects.increment() }

    func disconnected(_ reason: RedisError) { resets.increment() }

    func replied(afterNanos nanos: Int64) { latency.recordNanoseconds(nanos) }

    func failed(_ error: RedisError) { failures[error.label]?.increment() }

    func breakerChanged(from old: CircuitBreaker.State, to new: CircuitBreaker.State) {
        if old == .closed, new != .closed { breakersOpen.increment() }
        if old != .closed, new == .closed { breakersOpen.decrement() }
    }
}
