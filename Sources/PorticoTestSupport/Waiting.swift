import NIOConcurrencyHelpers

/// Polls `condition` until it holds; false if it still does not after `limit`.
///
/// The limit is a guard against a test hanging when the gateway is broken, never a measure of how
/// fast it is: keep it far above what the slowest machine needs. The whole suite's tests start at
/// once on two cores, and a CI run saw unit tests of pure functions finish 66 s in; a condition
/// that needs a few tasks scheduled waited more than 30 s there. Hence two minutes.
public func eventually(within limit: Duration = .seconds(120), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}

/// Runs `operation` and reports whether it returned before `limit`. If it hangs, the test fails
/// instead of hanging the whole suite (the operation is left behind, still running).
public func returns(within limit: Duration, _ operation: @escaping @Sendable () async -> Void) async -> Bool {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let pending = NIOLockedValueBox<CheckedContinuation<Bool, Never>?>(continuation)
        let finish: @Sendable (Bool) -> Void = { returned in
            pending.withLockedValue { waiting in
                waiting?.resume(returning: returned)
                waiting = nil
            }
        }
        Task {
            await operation()
            finish(true)
        }
        Task {
            try? await Task.sleep(for: limit)
            finish(false)
        }
    }
}
