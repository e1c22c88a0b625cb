import Logging
import NIOCore
import Synchronization

/// Counts one listener's open client connections against `limits.maxConnections`, and each client
/// address's against `limits.maxConnectionsPerAddress`.
///
/// A connection over either limit is closed as soon as it is accepted, before any handler or TLS
/// state is made for it. The per-address count keeps one client from holding every place (slow
/// bodies or idle keep-alives from one host would otherwise lock everyone else out); an address is
/// counted as the per-address rate limit counts it, so an IPv6 client is its /64
/// (``ClientAddress/rateLimitSubject(_:)``). Refusals are counted and logged, at most once a second
/// with the count since the last line, so a connection flood cannot turn into a log flood.
final class ListenerConnections: Sendable {
    let listener: String
    let limit: Int
    let perAddressLimit: Int
    private let open = Atomic<Int>(0)
    /// Open connections by address subject; an address is removed when its last one closes.
    private let byAddress = Mutex<[String: Int]>([:])
    private let refused = Atomic<Int>(0)
    private let refusedSinceLog = Atomic<Int>(0)
    /// Uptime second of the last refusal logged.
    private let lastLog = Atomic<Int64>(.min)
    private let logger: Logger
    private let clock: @Sendable () -> Int64

    /// - Parameter clock: seconds on a monotonic clock (tests may pass their own).
    init(
        listener: String, limit: Int, perAddressLimit: Int = .max, logger: Logger,
        clock: @escaping @Sendable () -> Int64 = ListenerConnections.uptimeSeconds
    ) {
        self.listener = listener
        self.limit = limit
        self.perAddressLimit = perAddressLimit
        self.logger = logger
        self.clock = clock
    }

    static func uptimeSeconds() -> Int64 {
        Int64(NIODeadline.now().uptimeNanoseconds / 1_000_000_000)
    }

    /// Connections refused since the listener started, for either limit.
    var refusedCount: Int { refused.load(ordering: .relaxed) }

    /// Takes a place for a newly accepted connection from `address` (its subject; nil when the
    /// socket has no peer address); false (and counted) when the listener or the address is full.
    /// A connection admitted must be given back with ``release(address:)``, with the same address.
    func admit(address: String?) -> Bool {
        guard open.wrappingAdd(1, ordering: .relaxed).newValue <= limit else {
            open.wrappingSubtract(1, ordering: .relaxed)
            return refuse(reason: "listener at maxConnections", address: nil)
        }
        guard let address else { return true }
        let admitted = byAddress.withLock { counts -> Bool in
            let count = counts[address, default: 0]
            guard count < perAddressLimit else { return false }
            counts[address] = count + 1
            return true
        }
        guard admitted else {
            open.wrappingSubtract(1, ordering: .relaxed)
            return refuse(reason: "address at maxConnectionsPerAddress", address: address)
        }
        return true
    }

    /// Gives back the place of a connection that closed.
    func release(address: String?) {
        open.wrappingSubtract(1, ordering: .relaxed)
        guard let address else { return }
        byAddress.withLock { counts in
            guard let count = counts[address] else { return }
            counts[address] = count > 1 ? count - 1 : nil
        }
    }

    /// Open connections from `address` (its subject).
    func openConnections(from address: String) -> Int {
        byAddress.withLock { $0[address, default: 0] }
    }

    private func refuse(reason: String, address: String?) -> Bool {
        refused.wrappingAdd(1, ordering: .relaxed)
        refusedSinceLog.wrappingAdd(1, ordering: .relaxed)
        let now = clock()
        if lastLog.exchange(now, ordering: .relaxed) < now {
            let count = refusedSinceLog.exchange(0, ordering: .relaxed)
            var metadata: Logger.Metadata = [
                "listener": .string(listener), "maxConnections": .stringConvertible(limit),
                "maxConnectionsPerAddress": .stringConvertible(perAddressLimit), "refused": .stringConvertible(count),
                "refusedTotal": .stringConvertible(refusedCount),
            ]
            if let address { metadata["address"] = .string(address) }
            logger.warning("connections refused: \(reason)", metadata: metadata)
        }
        return false
    }
}
