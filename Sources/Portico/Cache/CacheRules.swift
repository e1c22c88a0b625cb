import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

/// One version's caching, compiled from its `cache:` (or its service's): what the cache stage
/// and the fill consult per request. `nil` on a version that does not cache.
struct CacheRules: Sendable {
    /// Freshness for a storable response that states none (and a facade's answer), in seconds.
    let defaultTTL: Double?
    let sameForEveryKey: Bool
    /// Windows for a response that gives none of its own, in seconds.
    let staleWhileRevalidate: Double
    let staleIfError: Double

    init?(service: ServicePolicy, version: VersionPolicy) {
        guard let policy = version.cache ?? service.cache, policy.enabled else { return nil }
        defaultTTL = policy.defaultTTL.map(\.seconds)
        sameForEveryKey = policy.sameForEveryKey
        staleWhileRevalidate = policy.staleWhileRevalidate?.seconds ?? 0
        staleIfError = policy.staleIfError?.seconds ?? 0
    }

    /// Statuses a cache may store without explicit freshness (RFC 9110 §15.1, "heuristically
    /// cacheable"), which is when `defaultTTL` applies.
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The statuses RFC 9110 defines, whose caching rules this cache knows (`must-understand`).
    static let knownStatuses: Set<Int> = Set(
        [200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 305, 307, 308]
            + Array(400...417) + [421, 422, 426, 500, 501, 502, 503, 504, 505])

    /// Final statuses this cache stores when the response's own freshness allows: any it
    /// understands, except those whose meaning depends on the request (206, 304) or that describe
    /// a moment (1xx; 407 and 401 carry a challenge for one client).
    static func understands(status: Int) -> Bool {
        (200...599).contains(status) && status != 206 && status != 304 && status != 401 && status != 407
    }
}

extension Duration {
    /// In seconds, with the fraction.
    var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
