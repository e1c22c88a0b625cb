import NIOConcurrencyHelpers
import PorticoPolicy

/// A snapshot together with what the gateway derives from it once, when it is installed (today:
/// the client keys as ready-to-use HMAC contexts).
public struct ActivePolicy: Sendable {
    public let snapshot: PolicySnapshot
    let credentials: Credentials

    init(_ snapshot: PolicySnapshot) {
        self.snapshot = snapshot
        self.credentials = Credentials(policy: snapshot.policy)
    }
}

/// Holds the policy new requests are served from.
///
/// A request reads it once, at its head, and keeps that policy to the end; replacing it (a policy
/// reload) never affects requests in flight.
public final class PolicyStore: Sendable {
    private let box: NIOLockedValueBox<ActivePolicy>

    public init(_ snapshot: PolicySnapshot) {
        box = NIOLockedValueBox(ActivePolicy(snapshot))
    }

    public var current: ActivePolicy { box.withLockedValue { $0 } }

    /// Installs `snapshot` for new requests; the derived state is built before the swap, outside
    /// the lock.
    public func replace(with snapshot: PolicySnapshot) {
        let active = ActivePolicy(snapshot)
        box.withLockedValue { $0 = active }
    }
}
