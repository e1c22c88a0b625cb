import Logging
import NIOCore
import Synchronization

/// Counts one listener's open client connections against `limits.maxConnections`.
///
/// A connection over the limit is closed as soon as it is accepted, before any handler or TLS
/// state is made for it. Refusals are counted and logged, at most once a second with the count
/// since the last line, so a connection flood cannot turn into a log flood.
final class ListenerConnections: Sendable {
    let listener: String
    let limit: Int
    private let open = Atomic<Int>(0)
    private let refused = Atomic<Int>(0)
    private let refusedSinceLog = Atomic<Int>(0)
    /// Uptime second of the last refusal logged.
    private let lastLog = Atomic<Int64>(.min)
    private let logger: Logger
    private let clock: @Sendable () -> Int64

    /// - Parameter clock: seconds on a monotonic clock (tests may pass their own).
    init(listener: String, limit: Int, logger: Logger, clock: @escaping @Sendable () -> Int64 = ListenerConnections.uptimeSeconds) {
        self.listener = listener
        self.limit = limit
        self.logger = logger
        self.clock = clock
    }

    static func uptimeSeconds() -> Int64 {
        Int64(NIODeadline.now().uptimeNanoseconds / 1_000_000_000)
    }

    /// Connections refused since the listener started.
    var refusedCount: Int { refused.load(ordering: .relaxed) }

    /// Takes a place for a newly accepted connection; false (and counted) when the listener is full.
    func admit() -> Bool {
        if open.wrappingAdd(1, ordering: .relaxed).newValue <= limit { return true }
        open.wrappingSubtract(1, ordering: .relaxed)
        refused.wrappingAdd(1, ordering: .relaxed)
        refusedSinceLog.wrappingAdd(1, ordering: .relaxed)
        let now = clock()
        if lastLog.exchange(now, ordering: .relaxed) < now {
            let count = refusedSinceLog.exchange(0, ordering: .relaxed)
            logger.warning(
                "connections refused: listener at maxConnections",
                metadata: [
                    "listener": .string(listener), "maxConnections": .stringConvertible(limit), "refused": .stringConvertible(count),
                    "refusedTotal": .stringConvertible(refusedCount),
                ])
        }
        return false
    }

    /// Gives back the place of a connection that closed.
    func release() {
        open.wrappingSubtract(1, ordering: .relaxed)
    }
}
