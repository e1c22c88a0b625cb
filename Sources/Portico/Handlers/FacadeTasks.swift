import NIOConcurrencyHelpers
import PorticoUpstream

/// The fetches one facade (or code handler) request has in flight, as one task: the exchange holds
/// it, so a client that goes away cancels them all (the active source's, an aggregation's parts, a
/// code handler's, and the shadow's while the answer is pending), freeing the backends'
/// connections and concurrency slots at once instead of at their timeouts.
///
/// Once cancelled it stays so: a fetch asked for afterwards is refused before it draws from its
/// backend's limits (``SourceFetch``), and the facade tries no further source.
final class FacadeTasks: UpstreamTask {
    private struct State {
        var running: [Int: @Sendable () -> Void] = [:]
        var next = 0
        var cancelled = false
    }

    private let state = NIOLockedValueBox(State())

    /// Whether the request's client went away: nothing more is to be fetched for it.
    var isCancelled: Bool { state.withLockedValue { $0.cancelled } }

    /// Registers a fetch by what cancels it; the id to call ``finished(_:)`` with. A fetch
    /// started after the cancellation is cancelled at once.
    func started(cancel: @escaping @Sendable () -> Void) -> Int? {
        let id: Int? = state.withLockedValue { state in
            guard !state.cancelled else { return nil }
            state.next += 1
            state.running[state.next] = cancel
            return state.next
        }
        if id == nil { cancel() }
        return id
    }

    /// The fetch ended: it is no longer cancelled with the rest (its connection may serve another).
    func finished(_ id: Int) {
        _ = state.withLockedValue { $0.running.removeValue(forKey: id) }
    }

    func cancel() {
        let running = state.withLockedValue { state in
            state.cancelled = true
            defer { state.running = [:] }
            return Array(state.running.values)
        }
        for cancel in running { cancel() }
    }

    /// The facade reads each body whole and returns its credit itself (``SourceFetch``).
    func consumed(bytes: Int) {}
}
