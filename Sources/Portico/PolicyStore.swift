import Atomics
import NIOConcurrencyHelpers
import PorticoPolicy

/// Holds the policy new requests are served from.
///
/// A request reads it once, at its head, and keeps that policy to the end; replacing it (a policy
/// reload) never affects requests in flight.
///
/// The request path reads it through a ``Reader`` that each connection keeps: one atomic load of a
/// generation number, which only a reload writes, so the cache line stays shared by every core;
/// the compiled policy itself is taken under the lock only when the generation has moved. (A
/// reference held in an atomic would be one load too, but a strong reference's safe load is two
/// compare-and-swaps on one line that every core then writes, per request.) The policy is compiled
/// before it is installed, so a reload costs readers nothing but that one lock per connection.
public final class PolicyStore: Sendable {
    private let generation = ManagedAtomic<UInt64>(0)
    private let box: NIOLockedValueBox<(policy: CompiledPolicy, generation: UInt64)>

    public init(_ snapshot: PolicySnapshot) {
        box = NIOLockedValueBox((CompiledPolicy(snapshot), 0))
    }

    /// The compiled policy to serve from, for callers off the request path (start-up, tools).
    public var current: CompiledPolicy { box.withLockedValue { $0.policy } }

    /// Installs `snapshot` for new requests; it is compiled first, on the caller's thread.
    public func replace(with snapshot: PolicySnapshot) {
        let next = CompiledPolicy(snapshot)
        box.withLockedValue { state in
            state = (next, state.generation + 1)
            // Inside the lock, so that generations are published in the order policies were.
            generation.store(state.generation, ordering: .releasing)
        }
    }

    /// A connection's view of the store: the policy it last read and that policy's generation.
    /// Confined to the connection's event loop.
    struct Reader {
        private let store: PolicyStore
        private var cached: (policy: CompiledPolicy, generation: UInt64)

        init(_ store: PolicyStore) {
            self.store = store
            self.cached = store.box.withLockedValue { $0 }
        }

        /// The current policy: the cached one unless a reload has happened since it was read.
        mutating func current() -> CompiledPolicy {
            if store.generation.load(ordering: .acquiring) != cached.generation {
                cached = store.box.withLockedValue { $0 }
            }
            return cached.policy
        }
    }
}
