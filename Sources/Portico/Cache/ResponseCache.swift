import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Synchronization

/// The gateway's shared response cache (RFC 9111): stored responses, bounded in bytes, and the
/// fetches in flight that concurrent misses for the same key wait on (coalescing).
///
/// One per gateway, outliving reloads, shared by every event loop behind one lock: a lookup is
/// a dictionary probe and a flag, a store a few pointer moves, so the lock is held briefly.
/// Eviction is SIEVE (Zhang et al., NSDI '24): entries sit in insertion order, a hit only sets a
/// flag, and the eviction hand sweeps from the oldest, sparing (and clearing) flagged ones. It
/// keeps popular entries as LRU does, with no list surgery on a hit.
///
/// Coalescing: the first request to miss a key registers a ``CacheFill`` and goes to the backend;
/// later ones for the same key and version wait for it (at most `maxWaiters`, each at most
/// `waitTimeout`). When the fill ends, waiters look up again (finding what it stored, or, if it
/// was abandoned, one of them becomes the next fill) or, when the response was not storable, go
/// to the backend each.
public final class ResponseCache: Sendable {
    private let state = NIOLockedValueBox(State())
    private let clock: @Sendable () -> Double
    let metrics: CacheMetrics?
    /// The fleet's side (shared entries, purges for every gateway), in fleet mode.
    let shared: FleetCache?

    /// - Parameters:
    ///   - clock: seconds since 1970; tests pass their own to move time.
    ///   - metrics: where hits, misses and bytes are counted.
    ///   - shared: the fleet's side, in fleet mode.
    init(
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }, metrics: GatewayMetrics? = nil,
        shared: FleetCache? = nil
    ) {
        self.clock = clock
        self.metrics = metrics.map(CacheMetrics.init)
        self.shared = shared
    }

    /// The cache's time, in seconds since 1970.
    func now() -> Double { clock() }

    /// Bytes and entries held now.
    public var usage: (bytes: Int, entries: Int) {
        state.withLockedValue { ($0.bytes, $0.entryCount) }
    }

    /// Requests waiting now for another's response in flight.
    var waiting: Int {
        state.withLockedValue { $0.fills.values.reduce(0) { $0 + $1.waiters.count } }
    }

    // MARK: Lookup

    /// What a lookup found, and what the request is to do.
    enum Lookup {
        /// A stored response that serves the request as it is (fresh, or stale within what the
        /// request or `stale-while-revalidate` allows); `refresh` when this request is to start
        /// the one background refresh.
        case hit(CachedResponse, CacheUsability, refresh: CacheFill?)
        /// Another request's fetch for the key is in flight: wait for it, then look up again.
        case wait(EventLoopFuture<FillEnd>)
        /// Go to the backend and fill the cache; `stale` is the stored response to revalidate
        /// (and to fall back on if the backend fails).
        case fetch(CacheFill, stale: CachedResponse?)
        /// Go to the backend without registering a fill (too many waiters already, or a HEAD):
        /// nothing waits on this request, though a response it brings back may still be stored;
        /// `stale` as for `fetch`.
        case pass(stale: CachedResponse?)
    }

    func lookup(_ request: CacheRequest, on eventLoop: any EventLoop, maxWaiters: Int, waitTimeout: Duration) -> Lookup {
        let now = clock()
        let fillKey = FillKey(key: request.key, version: request.version)
        let result: Lookup = state.withLockedValue { state in
            let node = state.find(request)
            if let node {
                let usability = request.usability(of: node.entry, at: now)
                switch usability {
                case .fresh, .staleAllowed:
                    node.visited = true
                    return .hit(node.entry, usability, refresh: nil)
                case .staleWhileRevalidate:
                    node.visited = true
                    // A HEAD's refresh would bring back no body to store: it is left to a GET.
                    guard state.fills[fillKey] == nil, !request.isHEAD else { return .hit(node.entry, usability, refresh: nil) }
                    return .hit(node.entry, usability, refresh: state.register(fillKey, cache: self))
                case .needsValidation:
                    break
                }
            }
            // A HEAD's response has no body to store: it neither fills nor waits.
            if request.isHEAD { return .pass(stale: node?.entry) }
            if var inFlight = state.fills[fillKey] {
                guard inFlight.waiters.count < maxWaiters else { return .pass(stale: node?.entry) }
                let promise = eventLoop.makePromise(of: FillEnd.self)
                let id = state.nextWaiter
                state.nextWaiter += 1
                inFlight.waiters.append(Waiter(id: id, promise: promise))
                state.fills[fillKey] = inFlight
                let timeout = eventLoop.scheduleTask(in: .nanoseconds(waitTimeout.nanoseconds)) { [self] in
                    self.waitTimedOut(id, key: fillKey)
                }
                promise.futureResult.whenComplete { _ in timeout.cancel() }
                return .wait(promise.futureResult)
            }
            return .fetch(state.register(fillKey, cache: self), stale: node?.entry)
        }
        return result
    }

    /// The stored response `request` selects, if any, without any other effect (a background
    /// fill's waiters, the stale fallback when every target is down).
    func stored(_ request: CacheRequest) -> CachedResponse? {
        state.withLockedValue { $0.find(request)?.entry }
    }

    // MARK: Fills

    /// How a fill ended, for those waiting on it.
    enum FillEnd: Sendable {
        /// It stored a response, or was given up: look up again.
        case lookAgain
        /// Its response is not one the cache stores: go to the backend.
        case goToBackend
    }

    /// Ends the fill `id` of `key`: stores `entry` first, if any (replacing the variant
    /// `request` selects, evicting others to stay within `maxBytes`), then tells the waiters.
    func finish(
        _ id: Int, key: FillKey, _ end: FillEnd, storing entry: CachedResponse? = nil, selectedBy request: HTTPHeaders? = nil,
        maxBytes: Int = 0
    ) {
        var inserted = (stored: false, evicted: 0)
        let waiters: [Waiter] = state.withLockedValue { state in
            if let entry, let request {
                inserted = state.insert(entry, selectedBy: request, maxBytes: maxBytes)
            }
            guard let inFlight = state.fills[key], inFlight.id == id else { return [] }
            state.fills[key] = nil
            return inFlight.waiters
        }
        if let metrics, entry != nil {
            metrics.inserted(stored: inserted.stored, evicted: inserted.evicted)
            metrics.publish(usage)
        }
        for waiter in waiters { waiter.promise.succeed(end) }
    }

    private func waitTimedOut(_ id: Int, key: FillKey) {
        let waiter: Waiter? = state.withLockedValue { state in
            guard var inFlight = state.fills[key], let index = inFlight.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            let waiter = inFlight.waiters.remove(at: index)
            state.fills[key] = inFlight
            return waiter
        }
        waiter?.promise.succeed(.goToBackend)
    }

    /// Counts `bytes` more for `entry` (a compressed variant of its body), evicting other entries
    /// to stay within `maxBytes`; an entry no longer stored counts nothing.
    func grew(_ entry: CachedResponse, by bytes: Int, maxBytes: Int) {
        guard bytes > 0 else { return }
        let evicted = state.withLockedValue { $0.grow(entry, by: bytes, maxBytes: maxBytes) }
        if let metrics {
            metrics.inserted(stored: false, evicted: evicted)
            metrics.publish(usage)
        }
    }

    /// Stores a revalidated response in place of `old` (the backend answered 304), or an entry
    /// made without a fill.
    func replace(_ entry: CachedResponse, selectedBy request: HTTPHeaders, maxBytes: Int) {
        let inserted = state.withLockedValue { $0.insert(entry, selectedBy: request, maxBytes: maxBytes) }
        if let metrics {
            metrics.inserted(stored: inserted.stored, evicted: inserted.evicted)
            metrics.publish(usage)
        }
    }

    // MARK: Invalidation and purge

    /// Drops every stored response for `key` (every version and variant): an unsafe request to
    /// the target succeeded (RFC 9111 §4.4), or an operator purged it.
    @discardableResult
    func invalidate(_ key: CacheKey) -> Int {
        let removed = state.withLockedValue { $0.remove { $0.key == key } }
        metrics?.publish(usage)
        return removed
    }

    /// What a purge names.
    public enum PurgeSelector: Sendable, Equatable {
        /// One target (path and query) of one service.
        case target(service: String, target: String)
        /// Every entry of a service.
        case service(String)
        /// Every entry whose response carried the tag in `Surrogate-Key` or `Cache-Tag`.
        case tag(String)
        /// Everything.
        case all
    }

    /// Drops what `selector` names; the number of entries dropped.
    @discardableResult
    public func purge(_ selector: PurgeSelector) -> Int {
        let removed = state.withLockedValue { state -> Int in
            switch selector {
            case .target(let service, let target):
                let key = CacheKey(service: service, target: target)
                return state.remove { $0.key == key }
            case .service(let service): return state.remove { $0.key.service == service }
            case .tag(let tag): return state.remove { $0.tags.contains(tag) }
            case .all: return state.remove { _ in true }
            }
        }
        metrics?.publish(usage)
        return removed
    }

    // MARK: State

    struct FillKey: Hashable, Sendable {
        let key: CacheKey
        let version: Int
    }

    struct Waiter {
        let id: Int
        let promise: EventLoopPromise<FillEnd>
    }

    /// A fill in flight, by its ``CacheFill/id`` (not the object: a fill dropped unended ends
    /// itself from its `deinit`, which a reference held here would prevent).
    struct FillState {
        let id: Int
        var waiters: [Waiter] = []
    }

    /// A stored response in the SIEVE queue. Read and changed only under the cache's lock.
    final class Node: @unchecked Sendable {
        let entry: CachedResponse
        var visited = false
        /// Compressed variants of the body, counted beside the entry's own size.
        var extra = 0
        /// Toward the newest.
        var newer: Node?
        /// Toward the oldest.
        weak var older: Node?

        init(_ entry: CachedResponse) { self.entry = entry }
    }

    struct State {
        /// Each key's variants (versions, `Vary` selections).
        var entries: [CacheKey: [Node]] = [:]
        /// Newest and oldest ends of the queue; the oldest holds the strong chain's start.
        var newest: Node?
        var oldest: Node?
        /// Where the eviction hand stopped; it moves from older to newer.
        var hand: Node?
        var bytes = 0
        var entryCount = 0
        var fills: [FillKey: FillState] = [:]
        var nextWaiter = 0
        var nextFill = 0

        mutating func register(_ key: FillKey, cache: ResponseCache) -> CacheFill {
            nextFill += 1
            fills[key] = FillState(id: nextFill)
            return CacheFill(cache: cache, key: key, id: nextFill)
        }

        func find(_ request: CacheRequest) -> Node? {
            entries[request.key]?.first { $0.entry.version == request.version && $0.entry.matches(request.headers) }
        }

        /// Inserts `entry`, replacing the variant `request` selected, then evicts until the
        /// bytes fit `maxBytes`: whether it was stored (not when it alone is over the bound), and
        /// the number evicted.
        mutating func insert(_ entry: CachedResponse, selectedBy request: HTTPHeaders, maxBytes: Int) -> (stored: Bool, evicted: Int) {
            if let old = entries[entry.key]?.first(where: { $0.entry.version == entry.version && $0.entry.matches(request) }) {
                unlink(old)
            }
            guard entry.size <= maxBytes else { return (false, 0) }
            var evicted = 0
            while bytes + entry.size > maxBytes, let victim = nextVictim() {
                unlink(victim)
                evicted += 1
            }
            let node = Node(entry)
            entries[entry.key, default: []].append(node)
            // The queue: newest at one end; `newer` links are strong from the oldest.
            if let newest {
                newest.newer = node
                node.older = newest
            } else {
                oldest = node
            }
            newest = node
            bytes += entry.size
            entryCount += 1
            return (true, evicted)
        }

        mutating func grow(_ entry: CachedResponse, by bytes: Int, maxBytes: Int) -> Int {
            guard let node = entries[entry.key]?.first(where: { $0.entry === entry }) else { return 0 }
            node.extra += bytes
            self.bytes += bytes
            var evicted = 0
            while self.bytes > maxBytes, let victim = nextVictim() {
                // The entry that grew is spared once; if it alone is over the bound, it goes too.
                if victim === node, entryCount > 1 {
                    node.visited = true
                    continue
                }
                unlink(victim)
                evicted += 1
            }
            return evicted
        }

        /// SIEVE's choice: from the hand (or the oldest) toward the newest, the first entry not
        /// visited since the hand last passed; visited ones are cleared on the way.
        mutating func nextVictim() -> Node? {
            var node = hand ?? oldest
            while let candidate = node, candidate.visited {
                candidate.visited = false
                node = candidate.newer ?? oldest
            }
            hand = node?.newer
            return node
        }

        mutating func unlink(_ node: Node) {
            if hand === node { hand = node.newer }
            let older = node.older
            let newer = node.newer
            if let older { older.newer = newer } else { oldest = newer }
            if let newer { newer.older = older } else { newest = older }
            node.newer = nil
            node.older = nil
            if var variants = entries[node.entry.key] {
                variants.removeAll { $0 === node }
                entries[node.entry.key] = variants.isEmpty ? nil : variants
            }
            bytes -= node.entry.size + node.extra
            entryCount -= 1
        }

        mutating func remove(where condition: (CachedResponse) -> Bool) -> Int {
            let doomed = entries.values.flatMap { $0 }.filter { condition($0.entry) }
            for node in doomed { unlink(node) }
            return doomed.count
        }
    }
}

/// A fetch in flight that fills one key: the request that registered it sends it and ends it
/// (``store(_:selectedBy:maxBytes:)``, ``pass()`` or ``abandon()``), once. One dropped without
/// being ended ends itself as abandoned, so that no waiter is left to its timeout.
final class CacheFill: Sendable {
    let key: ResponseCache.FillKey
    let id: Int
    private let cache: ResponseCache
    private let ended = Atomic<Bool>(false)

    init(cache: ResponseCache, key: ResponseCache.FillKey, id: Int) {
        self.cache = cache
        self.key = key
        self.id = id
    }

    private func takeEnd() -> Bool {
        !ended.exchange(true, ordering: .acquiringAndReleasing)
    }

    /// Stores `entry`; the waiters look up again and find it.
    func store(_ entry: CachedResponse, selectedBy request: HTTPHeaders, maxBytes: Int) {
        guard takeEnd() else { return }
        cache.finish(id, key: key, .lookAgain, storing: entry, selectedBy: request, maxBytes: maxBytes)
    }

    /// The response is not storable: the waiters go to the backend themselves.
    func pass() {
        guard takeEnd() else { return }
        cache.finish(id, key: key, .goToBackend)
    }

    /// Given up without a response (the client left, the fetch failed): the waiters look up
    /// again, and the first becomes the next fill.
    func abandon() {
        guard takeEnd() else { return }
        cache.finish(id, key: key, .lookAgain)
    }

    deinit {
        if !ended.load(ordering: .acquiring) { cache.finish(id, key: key, .lookAgain) }
    }
}
