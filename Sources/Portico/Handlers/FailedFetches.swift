import Foundation
import NIOConcurrencyHelpers
import NIOCore
import PorticoUpstream

/// The backends a request's code handler's fetches failed on, with how: an ``UpstreamError`` or a
/// ``BodyTooLarge`` does not name its backend, and the problem answering it should.
final class FailedFetches: Sendable {
    private let failures = NIOLockedValueBox<[(backend: String, error: UpstreamError)]>([])
    private let oversized = NIOLockedValueBox<String?>(nil)

    func record(_ error: UpstreamError, backend: String) {
        failures.withLockedValue { $0.append((backend, error)) }
    }

    func recordOversized(backend: String) {
        oversized.withLockedValue { $0 = backend }
    }

    /// The last backend whose body was over the limit; `nil` when none was (the handler threw
    /// ``BodyTooLarge`` itself).
    var oversizedBackend: String? { oversized.withLockedValue { $0 } }

    /// The backend that failed with `error` (the last such fetch), else the last that failed at
    /// all; `nil` when no fetch failed so (the handler made the error up itself).
    func backend(for error: UpstreamError) -> String? {
        failures.withLockedValue { failures in
            let same = failures.last { $0.error.kind == error.kind && $0.error.detail == error.detail }
            return (same ?? failures.last)?.backend
        }
    }
}
