import Foundation

/// A value behind a lock, for the little state that synchronous code must reach: a signer's clock
/// reads the clock offset, and a cancellation handler removes a waiter.
///
/// `Synchronization.Mutex` would do, but it needs iOS 18 and this library supports iOS 16.
/// Nothing awaits while holding the lock.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
