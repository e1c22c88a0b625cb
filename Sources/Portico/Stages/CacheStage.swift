import NIOCore
import NIOHTTP1
import PorticoPolicy

/// The cache stage: for a version that caches, whether the response cache answers the request,
/// and if not, how it goes to the backend (filling the cache, revalidating a stale response,
/// after waiting for another request's response in flight).
///
/// It runs after the rate-limit stage, so a hit is authenticated, versioned and counted against
/// the caller's tier like any request. The backend's own limit is drawn here, only when the
/// request is going to the backend: a hit never draws from it (the rate-limit stage leaves it out
/// for requests this stage may answer, ``Exchange/cacheMayAnswer``). Unsafe requests are marked
/// so that their success invalidates the target's entries (RFC 9111 §4.4).
struct CacheStage: RequestStage {
    func spanName(for exchange: Exchange) -> String? { exchange.cacheRules == nil ? nil : "cache lookup" }

    let cache: ResponseCache
    let limits: any LimitStore

    /// Lookups a request makes at most: after a fill it waited for was given up, or stored a
    /// variant other than its own, it looks again; after this many it goes to the backend.
    static let maxLookups = 3

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard exchange.cacheRules != nil, let routed = exchange.routed, let version = exchange.version else { return .proceed }
        let key = CacheKey(service: routed.service.name, target: Self.target(routed))
        let head = exchange.head
        guard exchange.cacheMayAnswer else {
            if !Self.isSafe(head.method) { exchange.cache = .invalidate(key) }
            return .proceed
        }
        let request = CacheRequest(
            key: key, version: version, headers: head.headers,
            authenticated: exchange.keyID != nil || head.headers.contains(name: "authorization"),
            isHEAD: head.method == .HEAD)
        if Self.bypasses(head.headers) {
            exchange.cache = .bypass
            cache.metrics?.count(.bypass)
            return drawBackend(for: exchange, on: eventLoop)
        }
        return lookUp(request, for: exchange, on: eventLoop, lookups: 1)
    }

    private func lookUp(_ request: CacheRequest, for exchange: Exchange, on eventLoop: any EventLoop, lookups: Int) -> StageOutcome {
        let policy = exchange.snapshot.policy.cache ?? CachePolicy()
        switch cache.lookup(request, on: eventLoop, maxWaiters: policy.maxWaiters, waitTimeout: policy.waitTimeout) {
        case .hit(let entry, let usability, let refresh):
            exchange.cache = .hit(entry, usability, refresh: refresh, request: request, collapsed: lookups > 1)
            return .proceed
        case .wait(let ended):
            return .suspend(
                ended.hop(to: eventLoop).assumeIsolated().map { end -> StageOutcome in
                    if case .lookAgain = end, lookups < Self.maxLookups {
                        return lookUp(request, for: exchange, on: eventLoop, lookups: lookups + 1)
                    }
                    exchange.cache = .fetch(nil, stale: cache.stored(request), request: request)
                    return drawBackend(for: exchange, on: eventLoop)
                }.nonisolated())
        case .fetch(let fill, let stale):
            guard let shared = cache.shared, shared.sharesEntries else {
                exchange.cache = .fetch(fill, stale: stale, request: request)
                return drawBackend(for: exchange, on: eventLoop)
            }
            // The fleet's store before the backend; those waiting on this fill wait for both.
            return .suspend(
                shared.fetch(request, on: eventLoop).assumeIsolated().map { entry -> StageOutcome in
                    var stale = stale
                    if let entry, entry.matches(request.headers) {
                        let usability = request.usability(of: entry, at: cache.now())
                        if usability == .fresh || usability == .staleAllowed {
                            fill.store(entry, selectedBy: request.headers, maxBytes: policy.maxBytes)
                            exchange.cache = .hit(entry, usability, refresh: nil, request: request, collapsed: false)
                            return .proceed
                        }
                        if stale == nil || entry.responseTime > stale!.responseTime { stale = entry }
                    }
                    exchange.cache = .fetch(fill, stale: stale, request: request)
                    return drawBackend(for: exchange, on: eventLoop)
                }.nonisolated())
        case .pass(let stale):
            exchange.cache = .fetch(nil, stale: stale, request: request)
            return drawBackend(for: exchange, on: eventLoop)
        }
    }

    /// The backend's own limit, which the rate-limit stage left for this stage; a refusal gives
    /// up the fill this request registered, so that requests waiting on it look again at once.
    private func drawBackend(for exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let backend = exchange.destination?.proxyBackend, let draw = RateLimiter.draw(backend: backend),
            let service = exchange.routed?.rules.name
        else { return .proceed }
        let apply = { (outcome: LimitOutcome) -> StageOutcome in
            switch outcome {
            case .refused(let problem):
                exchange.cache?.fill?.abandon()
                return .answer(problem)
            case .admitted(let applied):
                if exchange.rateLimit == nil { exchange.rateLimit = applied }
                return .proceed
            }
        }
        switch limits.admit(LimitRequest(service: service, backend: draw), on: eventLoop, span: exchange.trace?.redisSpan()) {
        case .decided(let outcome): return apply(outcome)
        case .pending(let future): return .suspend(future.assumeIsolated().map(apply).nonisolated())
        }
    }

    /// RFC 9110 §9.2.1: what a client does not expect to change anything.
    static func isSafe(_ method: HTTPMethod) -> Bool {
        switch method {
        case .GET, .HEAD, .OPTIONS, .TRACE: true
        default: false
        }
    }

    /// Requests the cache leaves to the backend, unstored: a range (the cache keeps whole
    /// responses only), and preconditions other than the validators it evaluates itself.
    static func bypasses(_ headers: HTTPHeaders) -> Bool {
        headers.contains(name: "range") || headers.contains(name: "if-match") || headers.contains(name: "if-unmodified-since")
            || headers.contains(name: "if-range")
    }

    /// The normalised path and the query, as the request named them: what a stored response is
    /// found by within its service.
    static func target(_ routed: RoutedRequest) -> String {
        guard let query = routed.query else { return String(routed.path) }
        return "\(routed.path)?\(query)"
    }
}
