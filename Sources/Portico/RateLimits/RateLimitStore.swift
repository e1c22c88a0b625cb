import NIOConcurrencyHelpers

/// Which bucket a request draws from. Names are the policy's stable ids, so a bucket outlives
/// the snapshot it was first used under.
public struct RateLimitKey: Hashable, Sendable {
    public enum Scope: UInt8, Sendable {
        /// Every request to one backend, whoever sends it.
        case backend
        /// One key's calls to one service, under its tier's limit.
        case tier
        /// One client address's unauthenticated calls to one service.
        case address
        /// One client address's failed authentications, whatever the service.
        case authFailures
    }

    public let scope: Scope
    /// The backend, tier or service name.
    public let name: String
    /// For tiers, the service called; otherwise empty.
    public let service: String
    /// The key id or client address; empty for backends.
    public let subject: String

    public init(scope: Scope, name: String, service: String = "", subject: String = "") {
        self.scope = scope
        self.name = name
        self.service = service
        self.subject = subject
    }
}

/// Where rate-limit buckets live. The gateway owns one for its whole life (policy reloads keep it);
/// a bucket whose limit changed in a reload starts afresh, the others keep their state.
///
/// Decisions are made synchronously on the event loop: this is the bucket store under this
/// process's ``LocalLimitStore``. A fleet's buckets are Redis's, decided together with the nonce
/// in one script run (``FleetLimitStore``); both are ``LimitStore``s, which is what requests call.
public protocol RateLimitStore: Sendable {
    /// Draws one request from the bucket `key` under `limit` at `now` (monotonic nanoseconds).
    func acquire(_ key: RateLimitKey, limit: GCRALimit, now: Int64) -> RateLimitDecision

    /// What ``acquire(_:limit:now:)`` would decide at `now`, without drawing.
    func peek(_ key: RateLimitKey, limit: GCRALimit, now: Int64) -> RateLimitDecision
}

/// Rate-limit buckets in memory, in shards with a lock each so that event loops seldom meet.
///
/// Memory stays bounded: a bucket that owes nothing is indistinguishable from a new one, so such
/// buckets are swept out whenever a shard has doubled since its last sweep. If a shard still holds
/// its share of `capacity` live buckets, the eighth that will be idle soonest is dropped: those
/// clients are forgiven the little they still owe, which is the least harmful way to stay bounded.
public final class InMemoryRateLimitStore: RateLimitStore {
    private struct Shard {
        var buckets: [RateLimitKey: GCRAState] = [:]
        var sweepAt: Int
    }

    private let shards: [NIOLockedValueBox<Shard>]
    private let shardCapacity: Int
    private static let minimumSweep = 1024

    /// - Parameters:
    ///   - capacity: most buckets held at once (all shards together).
    ///   - shardCount: independent locks; more than the event loops that call in.
    public init(capacity: Int = 200_000, shardCount: Int = 16) {
        let count = max(1, shardCount)
        shardCapacity = max(16, capacity / count)
        shards = (0..<count).map { _ in NIOLockedValueBox(Shard(sweepAt: min(Self.minimumSweep, max(16, capacity / count)))) }
    }

    public func acquire(_ key: RateLimitKey, limit: GCRALimit, now: Int64) -> RateLimitDecision {
        let shard = shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
        let capacity = shardCapacity
        return shard.withLockedValue { shard in
            if let index = shard.buckets.index(forKey: key) {
                if shard.buckets.values[index].limit != limit {
                    shard.buckets.values[index] = GCRAState(limit: limit, now: now)
                }
                return shard.buckets.values[index].acquire(now: now)
            }
            if shard.buckets.count >= shard.sweepAt { Self.sweep(&shard, now: now, capacity: capacity) }
            var state = GCRAState(limit: limit, now: now)
            let decision = state.acquire(now: now)
            shard.buckets[key] = state
            return decision
        }
    }

    public func peek(_ key: RateLimitKey, limit: GCRALimit, now: Int64) -> RateLimitDecision {
        let shard = shards[Int(UInt(bitPattern: key.hashValue) % UInt(shards.count))]
        let state = shard.withLockedValue { shard in shard.buckets[key].flatMap { $0.limit == limit ? $0 : nil } }
        return (state ?? GCRAState(limit: limit, now: now)).peek(now: now)
    }

    /// Buckets held now, idle ones not yet swept included.
    public var count: Int { shards.reduce(0) { $0 + $1.withLockedValue { $0.buckets.count } } }

    private static func sweep(_ shard: inout Shard, now: Int64, capacity: Int) {
        shard.buckets = shard.buckets.filter { !$0.value.isIdle(at: now) }
        if shard.buckets.count >= capacity {
            let soonest = shard.buckets.values.map(\.idleFrom).sorted()
            let threshold = soonest[max(0, soonest.count / 8 - 1)]
            shard.buckets = shard.buckets.filter { $0.value.idleFrom > threshold }
        }
        shard.sweepAt = min(capacity, max(minimumSweep, shard.buckets.count * 2))
    }
}
