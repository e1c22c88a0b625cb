import Atomics
import CoreMetrics
import NIOConcurrencyHelpers
import Prometheus

/// The gateway's swift-metrics factory: counters and gauges are swift-prometheus's (atomics), and
/// timers are ``AtomicDurationHistogram``s, whose record is three relaxed atomic additions.
///
/// swift-prometheus records a histogram observation under a lock, and the gateway records two per
/// proxied request (its duration, its upstream time) from every event loop; these histograms keep
/// the request path free of locks. They are rendered in the same text format after the registry's
/// own metrics (``render()``).
struct GatewayMetricsFactory: MetricsFactory {
    let prometheus: PrometheusMetricsFactory
    let histograms: AtomicDurationHistograms

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        prometheus.makeCounter(label: label, dimensions: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        prometheus.makeFloatingPointCounter(label: label, dimensions: dimensions)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        prometheus.makeMeter(label: label, dimensions: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        prometheus.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        histograms.histogram(name: label, labels: dimensions)
    }

    func destroyCounter(_ handler: any CounterHandler) { prometheus.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { prometheus.destroyFloatingPointCounter(handler) }
    func destroyMeter(_ handler: any MeterHandler) { prometheus.destroyMeter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { prometheus.destroyRecorder(handler) }
    func destroyTimer(_ handler: any TimerHandler) {}
}
