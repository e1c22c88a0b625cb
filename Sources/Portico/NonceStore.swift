import NIOConcurrencyHelpers

/// Remembers the nonces of accepted signatures for as long as those signatures could be replayed.
///
/// A protocol so that a store shared by a fleet of gateways (Redis, say) can replace the in-memory
/// one. Whatever the store, it must fail closed: a nonce is never forgotten before its `expiry`.
public protocol NonceStore: Sendable {
    /// Records `nonce` for `keyID` until `expiry` (seconds since 1970) unless it is already there.
    func insert(keyID: String, nonce: String, expiry: Int64, now: Int64) -> NonceInsertion
}

public enum NonceInsertion: Sendable, Equatable {
    case inserted
    /// Already seen and not yet expired: the request is a replay.
    case replayed
    /// The store is at its bound and nothing in it has expired; the earliest entry frees up in
    /// `retryAfter` seconds.
    case full(retryAfter: Int64)
}

/// The in-memory ``NonceStore``: bounded in entries and in time, sharded so event loops rarely
/// meet on one lock.
///
/// Each shard holds a hash set for lookups and a min-heap of expiries for clean-up; expired
/// entries are dropped on the way in, never live ones.
public final class InMemoryNonceStore: NonceStore {
    private struct Shard {
        var expiries: [String: Int64] = [:]
        var heap = ExpiryHeap()
        let capacity: Int

        mutating func insert(_ entry: String, expiry: Int64, now: Int64) -> NonceInsertion {
            while let earliest = heap.min, earliest.expiry <= now {
                heap.removeMin()
                if expiries[earliest.entry] == earliest.expiry { expiries[earliest.entry] = nil }
            }
            if let known = expiries[entry], known > now { return .replayed }
            guard expiries.count < capacity else {
                return .full(retryAfter: max(1, (heap.min?.expiry ?? now + 1) - now))
            }
            expiries[entry] = expiry
            heap.insert((expiry, entry))
            return .inserted
        }
    }

    private let shards: [NIOLockedValueBox<Shard>]
    public let capacity: Int

    /// - Parameters:
    ///   - capacity: entries held at most, over all shards.
    ///   - shardCount: independent locks; each holds an equal share of `capacity`.
    public init(capacity: Int, shardCount: Int = 16) {
        let shardCount = max(1, min(shardCount, capacity))
        let perShard = (capacity + shardCount - 1) / shardCount
        self.capacity = perShard * shardCount
        shards = (0..<shardCount).map { _ in NIOLockedValueBox(Shard(capacity: perShard)) }
    }

    public func insert(keyID: String, nonce: String, expiry: Int64, now: Int64) -> NonceInsertion {
        let entry = keyID + "\n" + nonce  // a line break cannot occur in a header value
        let shard = shards[Int(UInt(bitPattern: entry.hashValue) % UInt(shards.count))]
        return shard.withLockedValue { $0.insert(entry, expiry: expiry, now: now) }
    }

    /// Entries currently held (expired ones included until the next insert in their shard clears them).
    public var count: Int {
        shards.reduce(0) { total, shard in total + shard.withLockedValue { $0.expiries.count } }
    }
}

/// A binary min-heap of (expiry, entry).
struct ExpiryHeap {
    private var items: [(expiry: Int64, entry: String)] = []

    var min: (expiry: Int64, entry: String)? { items.first }

    mutating func insert(_ item: (expiry: Int64, entry: String)) {
        items.append(item)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].expiry < items[parent].expiry else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func removeMin() {
        guard !items.isEmpty else { return }
        items.swapAt(0, items.count - 1)
        items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count, items[left].expiry < items[smallest].expiry { smallest = left }
            if right < items.count, items[right].expiry < items[smallest].expiry { smallest = right }
            guard smallest != parent else { return }
            items.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
