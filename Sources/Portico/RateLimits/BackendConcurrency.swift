import NIOConcurrencyHelpers
import Synchronization

/// Requests in flight to each backend, for the policy's `maxConcurrent` caps.
///
/// Counters are kept by backend name for the gateway's whole life, so a reload that changes a cap
/// counts the requests already in flight against the new one.
public final class BackendConcurrency: Sendable {
    /// One backend's in-flight count. A request that took a slot keeps this object and gives the
    /// slot back through it, so the release needs no lookup.
    public final class Counter: Sendable {
        fileprivate let inFlight = Atomic<Int>(0)

        /// Returns the slot taken by ``BackendConcurrency/acquire(_:max:)``.
        public func release() {
            inFlight.wrappingSubtract(1, ordering: .releasing)
        }
    }

    private let counters = NIOLockedValueBox<[String: Counter]>([:])

    public init() {}

    /// Takes a slot for a request to `backend` unless `max` are already in flight.
    public func acquire(_ backend: String, max: Int) -> Counter? {
        let counter = counter(for: backend)
        guard counter.inFlight.wrappingAdd(1, ordering: .acquiring).newValue <= max else {
            counter.release()
            return nil
        }
        return counter
    }

    /// Requests in flight to `backend` now.
    public func inFlight(_ backend: String) -> Int {
        counter(for: backend).inFlight.load(ordering: .relaxed)
    }

    private func counter(for backend: String) -> Counter {
        counters.withLockedValue { counters in
            if let counter = counters[backend] { return counter }
            let counter = Counter()
            counters[backend] = counter
            return counter
        }
    }
}

extension BackendConcurrency {
    /// The one place a request to `backend` takes its slot, whoever sends it (a proxied request,
    /// a facade's or code handler's fetch): nil for a backend without a `maxConcurrent` cap, the
    /// 503 when the cap is reached.
    func slot(for backend: CompiledBackend) -> Result<Counter?, Problem> {
        guard let cap = backend.maxConcurrent else { return .success(nil) }
        guard let slot = acquire(backend.name, max: cap) else { return .failure(.backendBusy(backend: backend.name, limit: cap)) }
        return .success(slot)
    }
}
