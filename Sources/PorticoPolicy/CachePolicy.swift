/// The response cache as a whole (`cache:` at the top level): how much memory it may hold and how
/// concurrent misses wait for one another. Services turn caching on for themselves
/// (``ServiceCachePolicy``); without any that do, the cache holds nothing.
///
/// The bound is counted in bytes (bodies, fields and a fixed overhead per entry) and never
/// exceeded: storing an entry evicts others first, and an entry larger than ``maxObjectBytes`` is
/// not stored at all (its response is passed on as it streams).
public struct CachePolicy: Sendable, Hashable {
    /// What every stored entry together may take.
    public var maxBytes: Int = 256 * 1024 * 1024
    /// The largest entry stored; a response announcing more, or streaming past it, is passed on
    /// without being kept.
    public var maxObjectBytes: Int = 1024 * 1024
    /// Where entries live. `redis` (fleet mode) shares them across the fleet.
    public var store: CacheStoreKind = .memory
    /// Requests that wait for the same key's response in flight at most (coalescing); one more
    /// goes to the backend itself.
    public var maxWaiters: Int = 4096
    /// How long a request waits for another's response in flight before going to the backend itself.
    public var waitTimeout: Duration = .seconds(10)

    public init() {}
}

public enum CacheStoreKind: String, Sendable, Hashable, CaseIterable {
    case memory
    case redis
}

/// One service's (or one version's) caching: off unless the policy says `cache:` there.
///
/// Freshness comes from the response (`s-maxage`, `max-age`, `Expires`); ``defaultTTL`` only fills
/// in for a response that says nothing about it and that RFC 9111 lets a shared cache store
/// heuristically (a 200, 404, 301… without `no-store`, `private` or `Authorization` in the way).
public struct ServiceCachePolicy: Sendable, Hashable {
    public var enabled: Bool = true
    /// The freshness given to a storable response without explicit freshness, and to a facade's answer.
    public var defaultTTL: Duration?
    /// Whether the service answers every key alike, so that a response to an authenticated request
    /// may serve another key's request even when it does not say `public` or `s-maxage`
    /// (RFC 9111 §3.5 otherwise forbids that).
    public var sameForEveryKey: Bool = false
    /// How long past freshness a stored answer may be served while one refresh runs in the
    /// background, when the response gives no `stale-while-revalidate` of its own (RFC 5861).
    public var staleWhileRevalidate: Duration?
    /// How long past freshness a stored answer may be served when the backend (or every source of
    /// a facade) fails, when the response gives no `stale-if-error` of its own (RFC 5861).
    public var staleIfError: Duration?

    public init(
        enabled: Bool = true, defaultTTL: Duration? = nil, sameForEveryKey: Bool = false, staleWhileRevalidate: Duration? = nil,
        staleIfError: Duration? = nil
    ) {
        self.enabled = enabled
        self.defaultTTL = defaultTTL
        self.sameForEveryKey = sameForEveryKey
        self.staleWhileRevalidate = staleWhileRevalidate
        self.staleIfError = staleIfError
    }
}
