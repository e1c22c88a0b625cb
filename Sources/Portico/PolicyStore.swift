import Atomics
import PorticoPolicy

/// Holds the policy new requests are served from.
///
/// A request reads it once, at its head, and keeps that policy to the end; replacing it (a policy
/// reload) never affects requests in flight.
///
/// Reading is one atomic load of a reference, no lock: every request on every event loop reads it,
/// so a lock here would be taken, and contended, per request. (swift-atomics makes a strong
/// reference's load safe against a concurrent replace by counting the reader in the same
/// double-width word while it takes its retain: lock-free, though two compare-and-swaps on a line
/// every loop shares.) The policy is compiled before the store, so a reload costs readers nothing
/// either.
public final class PolicyStore: Sendable {
    private let compiled: ManagedAtomic<CompiledPolicy>

    public init(_ snapshot: PolicySnapshot) {
        compiled = ManagedAtomic(CompiledPolicy(snapshot))
    }

    /// The compiled policy to serve a new request from.
    public var current: CompiledPolicy { compiled.load(ordering: .acquiring) }

    /// Installs `snapshot` for new requests; it is compiled first, on the caller's thread, then
    /// published with one atomic store.
    public func replace(with snapshot: PolicySnapshot) {
        let next = CompiledPolicy(snapshot)
        compiled.store(next, ordering: .releasing)
    }
}
