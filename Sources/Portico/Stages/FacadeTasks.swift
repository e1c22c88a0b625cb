import NIOConcurrencyHelpers
import PorticoUpstream

/// The fetches one facade request has in flight, as one task: the exchange holds it, so a client
/// that goes away cancels them all (the shadow's too), freeing the backends' connections and
/// concurrency slots at once instead of at their timeouts.
final class FacadeTasks: UpstreamTask {
    private struct State {
        var running: [Int: @Sendable () -> Void] = [:]
        var next = 0
        var cancelled = false
    }

    private let state = NIOLockedValueBox(State())

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
