import NIOConcurrencyHelpers
import PorticoPolicy

/// Holds the snapshot new requests are served from.
///
/// A request reads it once, at its head, and keeps that snapshot to the end; replacing it (a policy
/// reload) never affects requests in flight.
public final class PolicyStore: Sendable {
    private let box: NIOLockedValueBox<PolicySnapshot>

    public init(_ snapshot: PolicySnapshot) {
        box = NIOLockedValueBox(snapshot)
    }

    public var current: PolicySnapshot { box.withLockedValue { $0 } }

    public func replace(with snapshot: PolicySnapshot) {
        box.withLockedValue { $0 = snapshot }
    }
}
