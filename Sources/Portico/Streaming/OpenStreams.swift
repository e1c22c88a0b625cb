import NIOCore
import PorticoPolicy
import Synchronization

/// The kinds of connection that stay open, as metrics and logs name them.
enum StreamKind: String, CaseIterable, Sendable {
    case websocket
    case eventStream = "event-stream"
}

/// The streams open in this gateway: how many each service and each key holds (their
/// `maxUpgraded`), and each one's way to be closed from outside its event loop, for a reload that
/// revokes the key that opened it.
///
/// One per gateway, shared by every listener and kept across reloads, like the rate limiter's
/// buckets: a reload does not free the places of streams still open.
final class OpenStreams: Sendable {
    /// A stream's place, given back once when it ends.
    struct Place: Sendable, Hashable {
        let id: Int
        let service: String
        let key: String?
    }

    /// Why a new stream is refused.
    enum Refusal: Error, Equatable, Sendable {
        case service(limit: Int)
        case key(limit: Int)
    }

    private struct State {
        var byService: [String: Int] = [:]
        var byKey: [String: Int] = [:]
        var nextID = 0
        /// Each stream's key and the way to close it once it is open, by place id.
        var entries: [Int: Entry] = [:]
    }

    private struct Entry {
        var key: String?
        var close: (@Sendable (UpgradedStream.Ending) -> Void)?
        /// Decided while its handshake was still out (a reload revoked its key): it closes as soon
        /// as it opens.
        var pendingEnding: UpgradedStream.Ending?
    }

    private let state = Mutex(State())

    /// Takes a place for a stream of `service` opened by `key` (nil for a request no key
    /// authenticated), unless either is at its limit.
    func admit(service: String, serviceLimit: Int?, key: String?, keyLimit: Int?) -> Result<Place, Refusal> {
        state.withLock { state in
            let forService = state.byService[service, default: 0]
            if let serviceLimit, forService >= serviceLimit { return .failure(.service(limit: serviceLimit)) }
            if let key, let keyLimit, state.byKey[key, default: 0] >= keyLimit { return .failure(.key(limit: keyLimit)) }
            state.byService[service] = forService + 1
            if let key { state.byKey[key, default: 0] += 1 }
            state.nextID += 1
            state.entries[state.nextID] = Entry(key: key)
            return .success(Place(id: state.nextID, service: service, key: key))
        }
    }

    /// Remembers how to close the stream that holds `place` (from any thread); calls it at once
    /// if the stream was to close while it opened.
    func register(_ place: Place, close: @escaping @Sendable (UpgradedStream.Ending) -> Void) {
        let pending = state.withLock { state -> UpgradedStream.Ending? in
            state.entries[place.id]?.close = close
            return state.entries[place.id]?.pendingEnding
        }
        if let pending { close(pending) }
    }

    /// Gives `place` back.
    func release(_ place: Place) {
        state.withLock { state in
            state.entries[place.id] = nil
            if let count = state.byService[place.service] { state.byService[place.service] = count > 1 ? count - 1 : nil }
            if let key = place.key, let count = state.byKey[key] { state.byKey[key] = count > 1 ? count - 1 : nil }
        }
    }

    /// Streams open now for `service`.
    func count(service: String) -> Int { state.withLock { $0.byService[service, default: 0] } }

    /// Closes the streams whose key `policy` no longer admits (revoked or removed), each on its own
    /// event loop. Called once a reload has installed `policy`.
    func closeRevoked(under policy: Policy) {
        let closing = state.withLock { state in
            var closing: [@Sendable (UpgradedStream.Ending) -> Void] = []
            for (id, entry) in state.entries {
                guard let key = entry.key, policy.keys[key].map({ $0.status == .revoked }) ?? true else { continue }
                if let close = entry.close { closing.append(close) } else { state.entries[id]?.pendingEnding = .revoked }
            }
            return closing
        }
        for close in closing { close(.revoked) }
    }
}
