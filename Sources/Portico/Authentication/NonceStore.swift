import NIOConcurrencyHelpers
import Synchronization

/// Remembers the nonces of genuine signatures (admitted, or refused by a limit) for as long as
/// those signatures could be replayed.
///
/// A protocol so that a store shared by a fleet of gateways (Redis, say) can replace the in-memory
/// one. Whatever the store, it must fail closed: a nonce is never forgotten before its `expiry`.
/// And no key may take more than its `quota` of it, so that one key (extracted from a shipped app,
/// say) cannot fill the store and lock every other key out.
///
/// A nonce that finds no room (the key's quota is used up, or the store is full) is not recorded,
/// but its signature must still never be admitted later: the key's *refusal mark* is raised to the
/// signature's `created` instead, and every signature of that key created at or before the mark is
/// refused the same way (429 or 503, with `Retry-After`) until the mark's expiry, whatever its
/// nonce. The key was refused meanwhile anyway; its signatures created after the mark pass as soon
/// as it has room again.
public protocol NonceStore: Sendable {
    /// How `nonce` of `keyID` would be refused right now (nil: it would not be): recorded and
    /// still live (`.replayed`), or under the key's refusal mark (`.quotaExceeded`, `.full`). A
    /// cheap look before the request draws from its key's rate limit, so that replaying a captured
    /// request cannot drain the victim key's bucket; ``insert(keyID:nonce:created:expiry:now:quota:)``
    /// still decides.
    func check(keyID: String, nonce: String, created: Int64, now: Int64) -> NonceInsertion?

    /// Records `nonce` for `keyID` until `expiry` (seconds since 1970), unless it is already there
    /// (or under the key's refusal mark), the key already holds `quota` live nonces, or the store
    /// is full; in those last two cases the key's refusal mark is raised to `created`.
    func insert(keyID: String, nonce: String, created: Int64, expiry: Int64, now: Int64, quota: Int) -> NonceInsertion
}

public enum NonceInsertion: Sendable, Equatable {
    case inserted
    /// Already seen and not yet expired: the request is a replay.
    case replayed
    /// The key holds its whole share of the store; its earliest nonce frees up in `retryAfter`
    /// seconds. Only this key is refused.
    case quotaExceeded(retryAfter: Int64)
    /// The store is at its bound and nothing in it has expired; the earliest entry frees up in
    /// `retryAfter` seconds.
    case full(retryAfter: Int64)
}

/// The in-memory ``NonceStore``: bounded in entries and in time, sharded by key id so event loops
/// rarely meet on one lock and each key's count is exact.
///
/// Each shard holds, per key, a hash map of live nonces and a min-heap of their expiries, plus one
/// heap of every entry of the shard for clean-up; expired entries are dropped on the way in, never
/// live ones. The bound is shared by all shards, so a busy key can use more than a shard's share.
public final class InMemoryNonceStore: NonceStore {
    private struct KeyNonces {
        var expiries: [String: Int64] = [:]
        /// The same expiries, for the earliest one (a refused key's `Retry-After`).
        var heap = ExpiryHeap<Void>()
        /// Signatures created at or before `created` are refused until `expiry` (see ``NonceStore``),
        /// as the refusal that raised the mark last was (`storeFull`), with a retry at `retryAt`.
        var refusalMark: (created: Int64, expiry: Int64, storeFull: Bool, retryAt: Int64)?

        /// The refusal of a signature created at `created` under the mark at `now`, if it is under it.
        func markedRefusal(created: Int64, now: Int64) -> NonceInsertion? {
            guard let mark = refusalMark, mark.expiry > now, created <= mark.created else { return nil }
            let retryAfter = max(1, mark.retryAt - now)
            return mark.storeFull ? .full(retryAfter: retryAfter) : .quotaExceeded(retryAfter: retryAfter)
        }

        /// Raises the refusal mark to cover a signature created at `created` that expires at
        /// `expiry`, refused as `refusal` (`.quotaExceeded` or `.full`).
        mutating func mark(created: Int64, expiry: Int64, now: Int64, refusal: NonceInsertion) {
            var storeFull = false
            var retryAfter: Int64 = 1
            switch refusal {
            case .quotaExceeded(let seconds): retryAfter = seconds
            case .full(let seconds): (storeFull, retryAfter) = (true, seconds)
            case .inserted, .replayed: return
            }
            let (markCreated, markExpiry) = refusalMark.flatMap { $0.expiry > now ? ($0.created, $0.expiry) : nil } ?? (created, expiry)
            refusalMark = (max(markCreated, created), max(markExpiry, expiry), storeFull, now + retryAfter)
        }

        /// Whether it holds anything live at `now` (otherwise it is dropped).
        func holdsAnything(at now: Int64) -> Bool {
            !expiries.isEmpty || (refusalMark.map { $0.expiry > now } ?? false)
        }
    }

    private struct Shard {
        var keys: [String: KeyNonces] = [:]
        /// Every entry of the shard by expiry, so that one pass drops what expired for every key.
        var heap = ExpiryHeap<(keyID: String, nonce: String)>()

        /// Drops every expired entry; returns how many.
        mutating func purge(now: Int64) -> Int {
            var dropped = 0
            while let earliest = heap.min, earliest.expiry <= now {
                heap.removeMin()
                let (keyID, nonce) = earliest.payload
                guard var key = keys.removeValue(forKey: keyID) else { continue }
                if key.expiries[nonce] == earliest.expiry {
                    key.expiries[nonce] = nil
                    key.heap.removeMin()
                    dropped += 1
                }
                if key.holdsAnything(at: now) { keys[keyID] = key }
            }
            return dropped
        }
    }

    private let shards: [NIOLockedValueBox<Shard>]
    /// Live entries over all shards (expired ones count until a purge drops them).
    private let live = Atomic<Int>(0)
    /// The second of the last full sweep, so a store full of live nonces is swept at most once a
    /// second rather than at every refused request.
    private let lastSweep = Atomic<Int64>(.min)
    /// The earliest expiry the last sweep found: when a full store frees up, for the `Retry-After`
    /// of refusals between sweeps.
    private let earliestAfterSweep = Atomic<Int64>(.max)
    public let capacity: Int

    /// - Parameters:
    ///   - capacity: entries held at most, over all shards.
    ///   - shardCount: independent locks.
    public init(capacity: Int, shardCount: Int = 16) {
        self.capacity = max(1, capacity)
        shards = (0..<max(1, shardCount)).map { _ in NIOLockedValueBox(Shard()) }
    }

    private func shard(for keyID: String) -> NIOLockedValueBox<Shard> {
        shards[shardIndex(for: keyID)]
    }

    /// The shard that holds `keyID`'s nonces. It follows the process's seeded `hashValue`, so it
    /// changes from run to run: a test that needs keys apart asks here.
    func shardIndex(for keyID: String) -> Int {
        Int(UInt(bitPattern: keyID.hashValue) % UInt(shards.count))
    }

    public func check(keyID: String, nonce: String, created: Int64, now: Int64) -> NonceInsertion? {
        shard(for: keyID).withLockedValue { shard in
            guard let key = shard.keys[keyID] else { return nil }
            if let expiry = key.expiries[nonce], expiry > now { return .replayed }
            return key.markedRefusal(created: created, now: now)
        }
    }

    public func insert(keyID: String, nonce: String, created: Int64, expiry: Int64, now: Int64, quota: Int) -> NonceInsertion {
        let insert = { self.insertInShard(keyID: keyID, nonce: nonce, created: created, expiry: expiry, now: now, quota: quota) }
        let (first, byMark) = insert()
        // A full store is swept once before it refuses, unless the key's mark refused it.
        guard case .full = first, !byMark else { return first }
        // Entries of keys that went quiet stay counted until their shard is next written: sweep
        // them all before refusing, once a second at most.
        guard lastSweep.exchange(now, ordering: .relaxed) < now else {
            let earliest = earliestAfterSweep.load(ordering: .relaxed)
            let refusal = earliest == .max || earliest <= now ? first : .full(retryAfter: earliest - now)
            markFull(keyID: keyID, created: created, expiry: expiry, now: now, refusal: refusal)
            return refusal
        }
        var earliest = Int64.max
        for shard in shards {
            shard.withLockedValue { shard in
                live.wrappingSubtract(shard.purge(now: now), ordering: .relaxed)
                if let min = shard.heap.min { earliest = Swift.min(earliest, min.expiry) }
            }
        }
        earliestAfterSweep.store(earliest, ordering: .relaxed)
        let (second, _) = insert()
        guard case .full = second else { return second }
        let refusal = NonceInsertion.full(retryAfter: earliest == .max ? 1 : max(1, earliest - now))
        markFull(keyID: keyID, created: created, expiry: expiry, now: now, refusal: refusal)
        return refusal
    }

    /// Marks `keyID` for a nonce that a full store could not take: its signature must not pass later.
    private func markFull(keyID: String, created: Int64, expiry: Int64, now: Int64, refusal: NonceInsertion) {
        shard(for: keyID).withLockedValue { shard in
            var key = shard.keys.removeValue(forKey: keyID) ?? KeyNonces()
            key.mark(created: created, expiry: expiry, now: now, refusal: refusal)
            shard.keys[keyID] = key
        }
    }

    /// One attempt in the key's shard (a full store is marked by the caller, which may sweep and try
    /// again); `byMark` when the key's refusal mark answered.
    private func insertInShard(
        keyID: String, nonce: String, created: Int64, expiry: Int64, now: Int64, quota: Int
    ) -> (result: NonceInsertion, byMark: Bool) {
        shard(for: keyID).withLockedValue { shard in
            live.wrappingSubtract(shard.purge(now: now), ordering: .relaxed)
            // Taken out and put back, so that it is mutated in place rather than copied.
            var key = shard.keys.removeValue(forKey: keyID) ?? KeyNonces()
            defer { if key.holdsAnything(at: now) { shard.keys[keyID] = key } }
            if key.expiries[nonce] != nil { return (.replayed, false) }  // live: the purge dropped the rest
            if let refusal = key.markedRefusal(created: created, now: now) { return (refusal, true) }
            if key.expiries.count >= quota {
                let refusal = NonceInsertion.quotaExceeded(retryAfter: max(1, (key.heap.min?.expiry ?? now + 1) - now))
                key.mark(created: created, expiry: expiry, now: now, refusal: refusal)
                return (refusal, false)
            }
            guard live.wrappingAdd(1, ordering: .relaxed).newValue <= capacity else {
                live.wrappingSubtract(1, ordering: .relaxed)
                return (.full(retryAfter: max(1, (shard.heap.min?.expiry ?? now + 1) - now)), false)
            }
            key.expiries[nonce] = expiry
            key.heap.insert((expiry, ()))
            shard.heap.insert((expiry, (keyID, nonce)))
            return (.inserted, false)
        }
    }

    /// Entries currently held (expired ones included until a purge drops them).
    public var count: Int { live.load(ordering: .relaxed) }

    /// Entries `keyID` currently holds (expired ones included until its shard is next purged).
    public func count(keyID: String) -> Int {
        shard(for: keyID).withLockedValue { $0.keys[keyID]?.expiries.count ?? 0 }
    }
}

/// A binary min-heap of expiries, each with a payload.
struct ExpiryHeap<Payload> {
    private var items: [(expiry: Int64, payload: Payload)] = []

    var min: (expiry: Int64, payload: Payload)? { items.first }
    var count: Int { items.count }

    mutating func insert(_ item: (expiry: Int64, payload: Payload)) {
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

extension ExpiryHeap: Sendable where Payload: Sendable {}
