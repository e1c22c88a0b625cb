import NIOConcurrencyHelpers
import NIOCore

/// Merges identical facade source fetches in flight: while one `GET` of a backend's target is on
/// its way, another request's fetch of the same target (same `Accept`) waits for it instead of
/// sending its own, and draws nothing from the backend's limit or concurrency. One per gateway,
/// shared by every event loop.
///
/// Only a fetch's outcome is shared (its status and body, each request reforming them itself);
/// a fetch whose own client went away is not an outcome: those that waited on it fetch for
/// themselves.
final class FetchCoalescer: Sendable {
    /// The backend as compiled (a reload's backend of the same name, perhaps elsewhere now, is
    /// another), the target and the media types asked for.
    struct Key: Hashable, Sendable {
        let backend: ObjectIdentifier
        let target: String
        let accept: String
    }

    private let inFlight = NIOLockedValueBox([Key: EventLoopFuture<FetchedResponse>]())
    private let followers = NIOLockedValueBox(0)

    enum Role {
        /// This fetch sends; complete `promise` with its outcome (``finish(_:)`` when done).
        case leader(EventLoopPromise<FetchedResponse>)
        /// Another fetch is on its way: its outcome.
        case follower(EventLoopFuture<FetchedResponse>)
    }

    func join(_ key: Key, on eventLoop: any EventLoop) -> Role {
        inFlight.withLockedValue { inFlight in
            if let running = inFlight[key] {
                followers.withLockedValue { $0 += 1 }
                running.whenComplete { [followers] _ in followers.withLockedValue { $0 -= 1 } }
                return .follower(running)
            }
            let promise = eventLoop.makePromise(of: FetchedResponse.self)
            inFlight[key] = promise.futureResult
            return .leader(promise)
        }
    }

    func finish(_ key: Key) {
        _ = inFlight.withLockedValue { $0.removeValue(forKey: key) }
    }

    /// Fetches in flight now, and fetches waiting on them.
    var count: Int { inFlight.withLockedValue { $0.count } }
    var waiting: Int { followers.withLockedValue { $0 } }
}
