import CoreMetrics

/// The cache's series in `/metrics`: requests by what the cache did for them, bytes served from
/// it, what it stores and evicts, and what it holds. Made once, with the gateway's metrics.
struct CacheMetrics: Sendable {
    /// What the cache did for a request it could have answered.
    enum Result: String, CaseIterable, Sendable {
        /// Answered from a stored response, fresh (or stale as the request allowed).
        case hit
        /// Answered stale while one background refresh runs (`stale-while-revalidate`).
        case staleWhileRevalidate = "stale_while_revalidate"
        /// Answered stale because the backend failed (`stale-if-error`).
        case staleIfError = "stale_if_error"
        /// A stored response the backend confirmed (304).
        case revalidated
        /// Sent to the backend: nothing usable was stored.
        case miss
        /// Waited for another request's response in flight and was answered from it.
        case collapsed
        /// Not for the cache: a range, or a precondition the cache does not evaluate (`If-Match`,
        /// `If-Unmodified-Since`, `If-Range`).
        case bypass
    }

    private let results: [Result: CoreMetrics.Counter]
    private let hitBytes: CoreMetrics.Counter
    private let stored: CoreMetrics.Counter
    private let evictions: CoreMetrics.Counter
    private let bytes: CoreMetrics.Meter
    private let entries: CoreMetrics.Meter

    init(_ metrics: GatewayMetrics) {
        let factory = metrics.factory
        results = Dictionary(
            uniqueKeysWithValues: Result.allCases.map {
                ($0, CoreMetrics.Counter(label: "portico_cache_requests_total", dimensions: [("result", $0.rawValue)], factory: factory))
            })
        hitBytes = CoreMetrics.Counter(label: "portico_cache_hit_bytes_total", dimensions: [], factory: factory)
        stored = CoreMetrics.Counter(label: "portico_cache_stored_total", dimensions: [], factory: factory)
        evictions = CoreMetrics.Counter(label: "portico_cache_evictions_total", dimensions: [], factory: factory)
        bytes = CoreMetrics.Meter(label: "portico_cache_bytes", dimensions: [], factory: factory)
        entries = CoreMetrics.Meter(label: "portico_cache_entries", dimensions: [], factory: factory)
    }

    func count(_ result: Result) { results[result]?.increment() }

    /// A response served from the cache, of `bytes` body bytes.
    func served(bytes: Int) { hitBytes.increment(by: bytes) }

    /// An entry stored (`stored`) and others evicted to make room for it.
    func inserted(stored: Bool, evicted: Int) {
        if stored { self.stored.increment() }
        if evicted > 0 { evictions.increment(by: evicted) }
    }

    func publish(_ usage: (bytes: Int, entries: Int)) {
        bytes.set(Int64(usage.bytes))
        entries.set(Int64(usage.entries))
    }
}
