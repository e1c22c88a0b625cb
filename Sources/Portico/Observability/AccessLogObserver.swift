import Logging
import PorticoPolicy

/// The last stage: sees every exchange once it has ended, whichever way, counts it in the metrics
/// of the policy it was served by, and writes its access-log line when the policy asks for one.
struct AccessLogObserver: Sendable {
    let logger: Logger
    /// The dedicated writer (`portico serve`); without one, lines go through swift-log's `logger`.
    let writer: AccessLogWriter?

    func exchangeEnded(_ exchange: Exchange) {
        exchange.trace?.end(exchange)
        exchange.policy.requestMetrics?.exchangeEnded(exchange)
        guard exchange.snapshot.policy.accessLog.enabled else { return }
        let record = AccessRecord(exchange)
        if let writer {
            writer.write(record)
        } else {
            record.write(to: logger)
        }
    }
}
