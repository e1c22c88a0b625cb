import NIOConcurrencyHelpers
import NIOCore
import Synchronization

/// What the gateway knows of one target of one backend: requests in flight, recent failures,
/// ejection, active health. Kept by the ``TargetRegistry`` for the gateway's life, so a reload
/// that keeps a target keeps its state, and shared by every event loop (atomics, no lock).
final class TargetState: Sendable {
    enum Health: UInt8 {
        /// No active check has decided yet (a new target, or a backend without checks): used.
        case unknown
        case healthy
        case unhealthy
    }

    /// Requests (and retries) in flight to the target now.
    let inFlight = Atomic<Int>(0)
    /// Proxied attempts that failed in a row (connect failures, resets, timeouts, 5xx answers).
    let consecutiveFailures = Atomic<Int>(0)
    /// Monotonic nanoseconds until which the target is ejected; 0 when it is not.
    let ejectedUntil = Atomic<Int64>(0)
    /// Ejections in a row: each lasts once more as long as the first. A success after the last
    /// one ended starts the count again.
    let ejections = Atomic<Int>(0)
    private let healthValue = Atomic<UInt8>(Health.unknown.rawValue)
    /// Active checks passed (positive) or failed (negative) in a row; the health checker's alone.
    let checkStreak = Atomic<Int>(0)
    /// Failed attempts and ejections since start, for `/metrics` (counted only when they happen:
    /// a request that succeeds touches neither).
    let failuresTotal = Atomic<Int>(0)
    let ejectionsTotal = Atomic<Int>(0)

    var health: Health {
        get { Health(rawValue: healthValue.load(ordering: .relaxed)) ?? .unknown }
        set { healthValue.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Whether the target is ejected at `now`.
    func isEjected(at now: Int64) -> Bool {
        ejectedUntil.load(ordering: .relaxed) > now
    }
}

/// Every target's state, by backend and origin, for the gateway's life (policy reloads keep it),
/// with the clock ejections are timed by.
public final class TargetRegistry: Sendable {
    private struct Key: Hashable {
        let backend: String
        let origin: String
    }

    private let states = NIOLockedValueBox<[Key: TargetState]>([:])
    private let retryStates = NIOLockedValueBox<[String: BackendRetries]>([:])
    let clock: @Sendable () -> Int64

    /// - Parameter clock: monotonic nanoseconds; tests may pass their own.
    public init(clock: @escaping @Sendable () -> Int64 = { Int64(bitPattern: NIODeadline.now().uptimeNanoseconds) }) {
        self.clock = clock
    }

    /// The state of `origin` as a target of `backend`, made on first use (a policy compiling).
    func state(backend: String, origin: String) -> TargetState {
        states.withLockedValue { states in
            let key = Key(backend: backend, origin: origin)
            if let state = states[key] { return state }
            let state = TargetState()
            states[key] = state
            return state
        }
    }

    /// `backend`'s requests and retries in flight, for its retry budget.
    func retries(backend: String) -> BackendRetries {
        retryStates.withLockedValue { states in
            if let state = states[backend] { return state }
            let state = BackendRetries()
            states[backend] = state
            return state
        }
    }
}

/// A backend's requests and retries in flight, across its targets and event loops, and the lock
/// its ejections are decided under.
final class BackendRetries: Sendable {
    /// Requests in flight to the backend: proxied requests (from their first attempt to their
    /// last) and facade or code-handler fetches.
    let requests = Atomic<Int>(0)
    let retries = Atomic<Int>(0)
    /// Retries sent since start, for `/metrics`.
    let retriesTotal = Atomic<Int>(0)
    /// Held while one target is ejected, so that `maxEjectedPercent` is counted and kept in one step.
    let ejecting = Mutex(())

    /// Retries that may always be in flight, whatever the budget says (as Envoy's
    /// `min_retry_concurrency`), so that a quiet backend can still be retried.
    static let minimumRetries = 3

    /// Takes a retry slot if the budget allows one: retries in flight stay within `percent` of the
    /// requests in flight (or ``minimumRetries``).
    func startRetry(budgetPercent: Int) -> Bool {
        let allowed = max(Self.minimumRetries, requests.load(ordering: .relaxed) * budgetPercent / 100)
        guard retries.wrappingAdd(1, ordering: .relaxed).newValue <= allowed else {
            retries.wrappingSubtract(1, ordering: .relaxed)
            return false
        }
        retriesTotal.wrappingAdd(1, ordering: .relaxed)
        return true
    }
}
