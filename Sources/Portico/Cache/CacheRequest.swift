import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoUpstream

/// What the cache reads of a request that may be answered from it: its key, its version, the
/// fields a stored response's `Vary` may name, its own `Cache-Control`, and whether it was
/// authenticated (RFC 9111 §3.5).
struct CacheRequest: Sendable {
    let key: CacheKey
    let version: Int
    let headers: HTTPHeaders
    let control: CacheControl
    let authenticated: Bool
    let isHEAD: Bool

    init(key: CacheKey, version: Int, headers: HTTPHeaders, authenticated: Bool, isHEAD: Bool) {
        self.key = key
        self.version = version
        self.headers = headers
        var control = CacheControl(lines: headers["cache-control"])
        // `Pragma: no-cache` counts only where `Cache-Control` is absent (RFC 9111 §5.4).
        if headers["cache-control"].isEmpty, headers["pragma"].contains(where: { $0.lowercased().contains("no-cache") }) {
            control.noCache = true
        }
        self.control = control
        self.authenticated = authenticated
        self.isHEAD = isHEAD
    }

    /// How a stored response may serve this request now (RFC 9111 §4.2, §4.2.4; RFC 5861).
    func usability(of entry: CachedResponse, at now: Double) -> CacheUsability {
        let age = entry.age(at: now)
        let lifetime = entry.freshnessLifetime
        if entry.control.noCache || control.noCache { return .needsValidation }
        if let maxAge = control.maxAge, age > Double(maxAge) { return .needsValidation }
        if let minFresh = control.minFresh, lifetime - age < Double(minFresh) { return .needsValidation }
        if lifetime > age { return .fresh }
        if entry.mustRevalidate { return .needsValidation }
        let staleness = age - lifetime
        if let maxStale = control.maxStale, maxStale == Int.max || staleness <= Double(maxStale) { return .staleAllowed }
        if staleness < entry.staleWhileRevalidate { return .staleWhileRevalidate }
        return .needsValidation
    }

    /// Whether a stored response may answer this request because the backend failed: within its
    /// `stale-if-error` window (or the request's, which may widen it, RFC 5861 §4), and not one
    /// that must be revalidated.
    func mayServeOnError(_ entry: CachedResponse, at now: Double) -> Bool {
        // A request that asked for validation (`no-cache`, `max-age=0`) gets the failure, unless it
        // said itself how stale an answer it takes when the backend fails.
        let askedForValidation = control.noCache || control.maxAge == 0
        guard !entry.mustRevalidate, !entry.control.noCache, !askedForValidation || control.staleIfError != nil else { return false }
        let staleness = entry.staleness(at: now)
        if staleness <= 0 { return true }
        let window = max(entry.staleIfError, control.staleIfError.map(Double.init) ?? 0)
        return staleness <= window
    }

    /// Whether, and for how long, a response to this request may be stored (RFC 9111 §3, §4.2.1).
    func storage(
        status: Int, headers response: HTTPHeaders, contentLength: Int?, rules: CacheRules, maxObjectBytes: Int, responseTime: Double
    ) -> CacheStorage {
        if control.noStore { return .skip("the request says no-store") }
        guard !isHEAD else { return .skip("a response to HEAD has no body to store") }
        guard CacheRules.understands(status: status) else { return .skip("status \(status)") }
        // An event stream is live: stored, it would replay old events, and requests collapsed
        // onto its fill would wait for a stream that may never end.
        if UpstreamResponseHead(status: status, headers: response).isEventStream { return .skip("an event stream") }
        let directives = ResponseDirectives(response)
        let responseControl = directives.control
        // `must-understand` asks a cache to store only statuses whose caching rules it knows,
        // and then lets it ignore `no-store` (RFC 9111 §5.2.2.3).
        if responseControl.mustUnderstand {
            guard CacheRules.knownStatuses.contains(status) else { return .skip("must-understand, status \(status)") }
        } else if responseControl.noStore {
            return .skip("no-store")
        }
        if responseControl.isPrivate { return .skip("private") }
        let vary = CachedResponse.varyNames(response)
        if vary.contains("*") { return .skip("Vary: *") }
        // A session's cookie is one client's: a shared cache never hands it to another.
        if response.contains(name: "set-cookie") { return .skip("Set-Cookie") }
        if authenticated && !rules.sameForEveryKey
            && !(responseControl.isPublic || responseControl.sMaxAge != nil || responseControl.mustRevalidate)
        {
            return .skip("authenticated request, response not marked public")
        }
        if let contentLength, contentLength + CachedResponse.overhead > maxObjectBytes { return .skip("larger than maxObjectBytes") }
        let freshness: Double
        if let sMaxAge = responseControl.sMaxAge {
            freshness = Double(sMaxAge)
        } else if let maxAge = responseControl.maxAge {
            freshness = Double(maxAge)
        } else if !directives.targeted, let expires = response.first(name: "expires") {
            // An invalid date (`0`, say) means already expired (§5.3).
            let date = response.first(name: "date").flatMap(HTTPDate.parse).map(Double.init) ?? responseTime
            freshness = HTTPDate.parse(expires).map { max(0, Double($0) - date) } ?? 0
        } else if responseControl.isPublic || CacheRules.heuristicallyCacheable.contains(status) {
            freshness = rules.defaultTTL ?? 0
        } else {
            return .skip("no explicit freshness, status \(status)")
        }
        // Stale on arrival and nothing to revalidate or fall back on: of no use stored.
        let validators = response.contains(name: "etag") || response.contains(name: "last-modified")
        let staleUse =
            responseControl.staleIfError != nil || responseControl.staleWhileRevalidate != nil || rules.staleIfError > 0
            || rules.staleWhileRevalidate > 0
        if freshness <= 0 && !validators && !staleUse { return .skip("stale when received, without a validator") }
        return .store(freshness: freshness)
    }
}

/// How a stored response may serve a request.
enum CacheUsability {
    /// Fresh: served as it is.
    case fresh
    /// Stale, but the request accepts that much staleness (`max-stale`).
    case staleAllowed
    /// Stale within `stale-while-revalidate`: served, and refreshed in the background.
    case staleWhileRevalidate
    /// Only after the backend confirms it (a conditional request).
    case needsValidation
}

/// Whether a response is stored.
enum CacheStorage: Equatable {
    case store(freshness: Double)
    /// Why not (for the `Cache-Status` detail and the tests).
    case skip(String)
}
