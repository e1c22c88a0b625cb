import Logging
import PorticoPolicy

/// The last stage: sees every exchange once it has ended, whichever way, and writes its access-log
/// line when the policy asks for one.
struct AccessLogObserver: Sendable {
    let logger: Logger

    func exchangeEnded(_ exchange: Exchange) {
        if exchange.snapshot.policy.accessLog.enabled { exchange.record.write(to: logger) }
    }
}
