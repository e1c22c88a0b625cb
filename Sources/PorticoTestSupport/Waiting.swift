import NIOConcurrencyHelpers

/// Polls `condition` until it holds; false if it still does not after `limit`.
///
/// The limit is a guard against a test hanging when the gateway is broken, never a measure of how
/// fast it is: keep it far above what the slowest machine needs.
public func eventually(within limit: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
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
