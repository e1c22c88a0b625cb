/// Identical GETs in flight share one network request: the first caller starts it in a task of its
/// own, later ones wait for the same result.
///
/// The request runs in an unstructured task, so no caller owns it: a caller that is cancelled
/// stops waiting at once (with ``PorticoAPIError/cancelled``) while the others keep waiting, and
/// the answer still arrives and fills the cache even when every caller left.
final class InFlightRequests<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let table = Locked<[Key: SharedRequest<Value>]>([:])

    /// The result of the request for `key`: the one in flight, or a new one that `start` makes.
    func value(
        for key: Key, start: @escaping @Sendable () async -> Result<Value, PorticoAPIError>
    ) async -> Result<
        Value, PorticoAPIError
    > {
        let (shared, isNew) = table.withLock { table -> (SharedRequest<Value>, Bool) in
            if let existing = table[key] { return (existing, false) }
            let shared = SharedRequest<Value>()
            table[key] = shared
            return (shared, true)
        }
        if isNew {
            Task {
                let result = await start()
                self.table.withLock { table in
                    if table[key] === shared { table[key] = nil }
                }
                shared.finish(result)
            }
        }
        return await shared.wait()
    }

    /// How many callers wait for a request in flight, all requests together.
    var waiting: Int {
        let shared = table.withLock { Array($0.values) }
        return shared.reduce(0) { $0 + $1.waiting }
    }
}

/// One request's result and the callers waiting for it.
final class SharedRequest<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, PorticoAPIError>?
        var waiters: [Int: CheckedContinuation<Result<Value, PorticoAPIError>, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Locked(State())

    var waiting: Int { state.withLock { $0.waiters.count } }

    func finish(_ result: Result<Value, PorticoAPIError>) {
        let waiters = state.withLock { state in
            state.result = result
            defer { state.waiters = [:] }
            return state.waiters.values
        }
        for waiter in waiters { waiter.resume(returning: result) }
    }

    func wait() async -> Result<Value, PorticoAPIError> {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Task.isCancelled is the caller's: a cancellation that came before this point found
                // no waiter to remove, so it is honoured here.
                let now = state.withLock { state -> Result<Value, PorticoAPIError>? in
                    if let result = state.result { return result }
                    if Task.isCancelled { return .failure(.cancelled) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: .failure(.cancelled))
        }
    }
}
