import Logging
import PorticoUpstream

/// What every connection's handler shares: the policy, the upstream client, the access log.
struct GatewayServices: Sendable {
    let store: PolicyStore
    let upstream: any UpstreamClient
    /// Nonces of accepted signatures; outlives policy reloads.
    let nonces: any NonceStore
    /// Rate-limit buckets and backend concurrency; outlive policy reloads.
    let rateLimiter: RateLimiter
    let accessLogger: Logger
    let scheme: String
    /// The listener's policy name: which public base URL the service locator publishes to its clients.
    var listener: String = ""
    /// The access log's dedicated writer; without one, lines go to `accessLogger`.
    var accessLogWriter: AccessLogWriter? = nil
    /// Where TLS handshakes and error answers are counted (requests count into their policy's).
    var metrics: GatewayMetrics? = nil
    /// Where facades log failed sources and shadow mismatches.
    var logger = Logger(label: "portico")
    /// Handlers written in Swift, by name.
    var codeHandlers: [String: any CodeHandler] = [:]
    /// Where requests draw from their limits and record their nonces: this process's
    /// (`rateLimiter` and `nonces`), or, in fleet mode, the fleet's in Redis.
    let limits: any LimitStore
    /// The response cache every listener shares; outlives policy reloads.
    var cache: ResponseCache
    /// Facade source fetches in flight, which identical ones wait for (one per gateway).
    var sourceFetches = FetchCoalescer()
    /// Token issuers' keys, fetched through `upstream` (one set per gateway, kept across reloads).
    var jwtKeys: JWTKeySets
    /// The WebSocket streams open (one registry per gateway, kept across reloads).
    var streams = OpenStreams()
    /// The TLS client contexts of WebSocket handshakes to `https` targets (one set per gateway).
    var upgradeTLS = UpstreamUpgrade.TLSContexts()

    /// - Parameter limits: where limits and nonces are decided; by default this process's
    ///   (`rateLimiter` and `nonces`). In fleet mode the gateway passes its ``FleetLimitStore``.
    init(
        store: PolicyStore, upstream: any UpstreamClient, nonces: any NonceStore, rateLimiter: RateLimiter, accessLogger: Logger,
        scheme: String, listener: String = "", accessLogWriter: AccessLogWriter? = nil, metrics: GatewayMetrics? = nil,
        logger: Logger = Logger(label: "portico"), codeHandlers: [String: any CodeHandler] = [:],
        limits: (any LimitStore)? = nil, cache: ResponseCache? = nil
    ) {
        self.store = store
        self.upstream = upstream
        self.nonces = nonces
        self.rateLimiter = rateLimiter
        self.accessLogger = accessLogger
        self.scheme = scheme
        self.listener = listener
        self.accessLogWriter = accessLogWriter
        self.metrics = metrics
        self.logger = logger
        self.codeHandlers = codeHandlers
        self.limits = limits ?? LocalLimitStore(rateLimiter: rateLimiter, nonces: nonces)
        self.cache = cache ?? ResponseCache(metrics: metrics)
        self.jwtKeys = JWTKeySets(loader: JWKSLoader(upstream: upstream, logger: logger))
    }
}
