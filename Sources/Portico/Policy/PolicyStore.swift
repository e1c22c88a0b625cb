import Atomics
import Foundation
import NIOConcurrencyHelpers
import PorticoPolicy

/// Which policy is active: what `/admin/policy` and the metrics report, and what a reload moves on.
public struct PolicyRevision: Sendable, Hashable {
    /// 0 for the policy the gateway started with, one more for each policy installed since.
    public var generation: UInt64
    /// SHA-256 (hex) of the policy files' names and text, in name order; empty for a policy that
    /// did not come from files (tests).
    public var contentHash: String
    /// When the policy was installed.
    public var loadedAt: Date
}

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
    private let revisionBox: NIOLockedValueBox<PolicyRevision>
    /// What each compiled policy's requests count into; nil when nothing is counted (tools, tests).
    let metrics: GatewayMetrics?
    /// The backends' targets' state, which every compiled policy's backends share.
    let targets: TargetRegistry
    /// The addresses the backends' host names resolved to last, which every compile expands them to.
    let addresses: ResolvedAddresses
    /// The tracers of the policies compiled here; the installed policy's runs.
    let tracers: TracerRegistry?

    public convenience init(_ snapshot: PolicySnapshot, contentHash: String = "") {
        self.init(snapshot, contentHash: contentHash, metrics: nil)
    }

    init(
        _ snapshot: PolicySnapshot, contentHash: String, metrics: GatewayMetrics?, targets: TargetRegistry = TargetRegistry(),
        addresses: ResolvedAddresses = ResolvedAddresses(), tracers: TracerRegistry? = nil
    ) {
        self.metrics = metrics
        self.targets = targets
        self.addresses = addresses
        self.tracers = tracers
        let compiled = CompiledPolicy(snapshot, metrics: metrics, targets: targets, addresses: addresses.current, tracers: tracers)
        tracers?.activate(compiled.tracer)
        box = NIOLockedValueBox((compiled, 0))
        let revision = PolicyRevision(generation: 0, contentHash: contentHash, loadedAt: Date())
        revisionBox = NIOLockedValueBox(revision)
        metrics?.policyInstalled(revision)
    }

    /// The compiled policy to serve from, for callers off the request path (start-up, tools).
    public var current: CompiledPolicy { box.withLockedValue { $0.policy } }

    /// The active policy's generation, hash and load time.
    public var revision: PolicyRevision { revisionBox.withLockedValue { $0 } }

    /// Installs `snapshot` for new requests; it is compiled first, on the caller's thread.
    @discardableResult
    public func replace(with snapshot: PolicySnapshot, contentHash: String = "") -> PolicyRevision {
        install(compile(snapshot), contentHash: contentHash)
    }

    /// Compiles `snapshot` the way this store's policies are (with its metrics), without installing it.
    func compile(_ snapshot: PolicySnapshot) -> CompiledPolicy {
        CompiledPolicy(snapshot, metrics: metrics, targets: targets, addresses: addresses.current, tracers: tracers)
    }

    /// Installs a policy compiled beforehand (a reload compiles off the event loops): new requests
    /// read it from now on; requests in flight finish on the one they started with.
    @discardableResult
    func install(_ next: CompiledPolicy, contentHash: String) -> PolicyRevision {
        tracers?.activate(next.tracer)
        return box.withLockedValue { state in
            state = (next, state.generation + 1)
            // Inside the lock, so that generations are published in the order policies were.
            generation.store(state.generation, ordering: .releasing)
            let revision = PolicyRevision(
                generation: revisionBox.withLockedValue { $0.generation } + 1, contentHash: contentHash, loadedAt: Date())
            revisionBox.withLockedValue { $0 = revision }
            metrics?.policyInstalled(revision)
            return revision
        }
    }

    /// The compiled policy in place now, and the internal generation a ``refresh(_:from:)`` is
    /// made against.
    var compiledNow: (policy: CompiledPolicy, generation: UInt64) { box.withLockedValue { $0 } }

    /// Puts in place the same policy compiled again (its backends' host names resolved anew):
    /// new requests read it; the revision (what an operator installed) stays. Dropped if anything
    /// was installed since `generation`, so a reload is never undone by a refresh compiled before it.
    @discardableResult
    func refresh(_ next: CompiledPolicy, from generation: UInt64) -> Bool {
        box.withLockedValue { state in
            guard state.generation == generation else { return false }
            state = (next, state.generation + 1)
            self.generation.store(state.generation, ordering: .releasing)
            return true
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
