import Version

/// The policy as the YAML files say it, validated: one type per YAML mapping, field for field.
///
/// These types follow the file format; the request path reads the compiled ``PolicySnapshot``
/// instead, so the format can grow without touching the hot path.
public struct Policy: Sendable {
    public var listeners: [ListenerPolicy]
    public var limits: LimitsPolicy
    public var upstream: UpstreamPolicy
    public var accessLog: AccessLogPolicy
    public var backends: [String: BackendPolicy]
    public var services: [String: ServicePolicy]
    public var signatures: SignaturePolicy
    public var apiKeys: APIKeyPolicy
    public var keys: [String: ClientKeyPolicy]
    /// Rate-limit tiers by name; a key's `tier` names one.
    public var tiers: [String: TierPolicy] = [:]
    /// The request fields clients name their app version and platform in.
    public var clients = ClientsPolicy()
    /// The service locator; `nil`: none is published.
    public var locator: LocatorPolicy?
    /// The admin listener; none when the policy has no `admin` section.
    public var admin: AdminPolicy?
    /// Fleet mode: rate limits and nonces shared through Redis; `nil` keeps them in memory.
    public var cluster: ClusterPolicy?
    /// The response cache's bounds (`cache:`); services turn caching on for themselves.
    public var cache: CachePolicy?
    /// Response compression (`compression:`), on for every service that does not turn it off.
    public var compression: CompressionPolicy?
    /// The proxies in front of the gateway whose `X-Forwarded-For` is believed: a request from one
    /// of them is taken to come from the address it names (``ClientAddressRule``); from any other
    /// peer, the field is the client's own claim and ignored.
    public var trustedProxies: [AddressRange] = []
    /// The token issuers services with `auth: jwt` may trust.
    public var jwt = JWTPolicy()
    /// OpenTelemetry traces (`tracing:`); `nil`: off.
    public var tracing: TracingPolicy?
}

/// A socket the gateway accepts connections on.
public struct ListenerPolicy: Sendable, Hashable {
    public var name: String
    public var address: String
    /// `0` asks the system for an ephemeral port (tests use it).
    public var port: Int
    /// When set, the listener terminates TLS (HTTPS); otherwise it speaks plain HTTP.
    public var tls: ListenerTLSPolicy?
    /// What the listener speaks, in order of preference: `[h2, http/1.1]` with TLS (ALPN chooses),
    /// `[http/1.1]` without. A plain listener speaks HTTP/2 only to clients with prior knowledge
    /// (`h2c`), told apart from HTTP/1.1 by the connection preface.
    public var protocols: [ListenerProtocol]

    public init(name: String, address: String, port: Int, tls: ListenerTLSPolicy?, protocols: [ListenerProtocol]? = nil) {
        self.name = name
        self.address = address
        self.port = port
        self.tls = tls
        self.protocols = protocols ?? (tls == nil ? [.http11] : [.h2, .http11])
    }
}

/// A protocol a listener may speak.
public enum ListenerProtocol: String, Sendable, Hashable, CaseIterable {
    case http11 = "http/1.1"
    /// HTTP/2 over TLS, agreed through ALPN (RFC 9113 §3.2).
    case h2
    /// HTTP/2 over plain TCP with prior knowledge (RFC 9113 §3.3): the client opens with the preface.
    case h2c
}

/// Bounds on an HTTP/2 connection (`limits.http2`), on top of the limits every request has: what
/// the gateway announces in its SETTINGS, and how much of each flood it takes before it sends
/// GOAWAY (ENHANCE_YOUR_CALM) and closes. Together they bound what one connection may make the
/// gateway hold: `connectionWindowSize` of request bytes not yet read, each of
/// `maxConcurrentStreams` streams at most `initialWindowSize` of them and a response buffer, and a
/// header block at most `maxHeaderListSize` while it is assembled.
public struct HTTP2LimitsPolicy: Sendable, Hashable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams one client may have open at once; one more is
    /// refused with RST_STREAM (REFUSED_STREAM), which a client may retry.
    public var maxConcurrentStreams: Int = 100
    /// SETTINGS_MAX_HEADER_LIST_SIZE: the largest header block, checked frame by frame as it
    /// arrives (CONTINUATION included) and again as HPACK decodes it, so neither a flood of
    /// CONTINUATION frames nor a small block that decodes huge (an HPACK bomb) is ever held whole.
    public var maxHeaderListSize: Int = 16 * 1024
    /// SETTINGS_HEADER_TABLE_SIZE: the HPACK dynamic table the client may fill on this side.
    public var headerTableSize: Int = 4096
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a client may send on one stream before the
    /// gateway has read them.
    public var initialWindowSize: Int = 65535
    /// The connection's receive window: request body bytes of all streams together not yet read.
    public var connectionWindowSize: Int = 1024 * 1024
    /// RST_STREAM frames a client may send within ``floodWindow`` (streams opened and cancelled at
    /// once: CVE-2023-44487's rapid reset); one more closes the connection with GOAWAY.
    public var maxResets: Int = 200
    /// SETTINGS, PING and PRIORITY frames a client may send within ``floodWindow``.
    public var maxControlFrames: Int = 200
    /// WINDOW_UPDATE frames a client may send within ``floodWindow``. A client reading a large
    /// response sends one per half window it takes; a flood of them is work without a request.
    public var maxWindowUpdates: Int = 10_000
    /// The sliding window the flood counts above are kept over.
    public var floodWindow: Duration = .seconds(30)

    public init() {}
}

/// Bounds on what one client connection may make the gateway hold or wait for.
public struct LimitsPolicy: Sendable, Hashable {
    /// Largest request body accepted; larger ones get 413. Bodies are buffered whole (signature
    /// digests are checked before forwarding), so this is also the memory a request may pin.
    public var maxBodyBytes: Int = 1024 * 1024
    /// Largest request head (request line and header fields); larger ones get 431.
    public var maxHeadBytes: Int = 16 * 1024
    /// Most header fields in one request; more get 431.
    public var maxHeaderCount: Int = 100
    /// Time from a request's first byte until its head is complete, and the longest pause while its
    /// body arrives. Past it the client gets 408 and the connection closes.
    public var headTimeout: Duration = .seconds(10)
    /// The slowest a body may arrive, in bytes per second, once ``headTimeout`` has passed since its
    /// head (the grace period): a body must be whole by `head + headTimeout + received / rate`, so a
    /// client dribbling a byte now and then cannot hold its connection for ever (mod_reqtimeout's
    /// `MinRate`). `0` turns it off, leaving only the pause limit.
    public var minBodyRate: Int = 500
    /// How long a keep-alive connection may sit between requests before the gateway closes it.
    public var idleTimeout: Duration = .seconds(60)
    /// Client connections one listener keeps open at once; one more is closed as soon as it is
    /// accepted, so a flood of connections cannot use up the process's file descriptors.
    public var maxConnections: Int = 10_000
    /// Failed authentications (401 answers of the authenticate stage) one client address (an IPv6
    /// client's /64) may cause: past it, its requests to authenticated services get 429 before
    /// any verification, so a flood of forged signatures costs the gateway almost nothing. Each
    /// gateway counts on its own, also in fleet mode. `nil` (`off` in the file): no limit.
    public var authFailures: RateLimitPolicy? = RateLimitPolicy(count: 10, period: .seconds(1), burst: 100)
    /// Client connections one address (an IPv6 client's /64) may keep open on one listener; more
    /// are closed at accept, so that one client cannot take every place of ``maxConnections``.
    public var maxConnectionsPerAddress: Int = 1024
    /// How long response bytes may wait to be written without any progress (a write completing)
    /// before the connection is closed at once. A client that stops reading would otherwise hold its
    /// connection and the bytes queued for it for ever. 60 s, like nginx's `send_timeout`.
    public var sendTimeout: Duration = .seconds(60)
    /// What HTTP/2 connections may hold and send (`limits.http2`).
    public var http2 = HTTP2LimitsPolicy()
}

/// How the libcurl driver is sized.
public struct UpstreamPolicy: Sendable, Hashable {
    /// Dedicated curl threads, each with its own multi handle and connection pool.
    public var threads: Int = 1
    /// Connections one curl thread opens to one host:port at most; further requests queue in curl.
    /// Time spent queued counts toward the backend's `timeout`.
    public var maxConnectionsPerHost: Int = 64
    /// Idle keep-alive connections one curl thread keeps for reuse.
    public var maxIdleConnections: Int = 256
    /// How long the NIO client keeps an idle keep-alive connection to a backend for reuse.
    public var idleConnectionTimeout: Duration = .seconds(60)
}

/// The per-request log line.
public struct AccessLogPolicy: Sendable, Hashable {
    public var enabled: Bool = true
    /// How each line is written by `portico serve`'s access-log writer.
    public var format: AccessLogFormat = .json
}

/// The access log's line formats.
public enum AccessLogFormat: String, Sendable, Hashable, CaseIterable {
    /// One JSON object per line.
    case json
    /// `key=value` pairs separated by spaces, values quoted when they need it.
    case logfmt
}

/// A service behind the gateway, by stable name.
public struct BackendPolicy: Sendable, Hashable {
    public var name: String
    /// Its instances (`targets`, or the one `url`); they share one scheme and one base path.
    public var targets: [BackendTarget]
    /// The first target's URL: its scheme and base path are every target's (its path, if any,
    /// prefixes every forwarded path).
    public var url: BackendURL { targets[0].url }
    public var connectTimeout: Duration = .seconds(2)
    /// Whole-exchange limit, from hand-off to curl until the last body byte.
    public var timeout: Duration = .seconds(30)
    /// Requests the gateway sends this backend, counted over every service, key and facade that
    /// uses it; over it, clients get 429.
    public var rateLimit: RateLimitPolicy?
    /// Requests in flight to this backend at once; one more gets 503.
    public var maxConcurrent: Int?
    /// Which upstream client calls it, as the file says; `nil` (not set) means NIO for `http://`
    /// and libcurl for `https://`. NIO with `https://` is refused when the policy is read.
    public var client: BackendClient?
    /// How requests are spread over ``targets``.
    public var balance: BalancePolicy = .roundRobin
    /// What `balance: hash` hashes.
    public var hashOn: HashKey = .key
    /// Requests in flight to each target at once; a target at its cap is passed over.
    public var maxConcurrentPerTarget: Int?
    public var healthCheck: HealthCheckPolicy?
    /// Passive ejection of failing targets; on by default for a backend of several targets.
    public var outlierDetection: OutlierDetectionPolicy?
    public var retries: RetryPolicy?
    /// How often a target named by a host name is resolved to all its addresses (each one a
    /// target): by default every 30 s for `targets`, off for a single `url`; `nil`
    /// (`resolveEvery: off`) leaves the name to be resolved at each connect. Names of `https://`
    /// targets are never expanded: libcurl checks the certificate against the name it connects to.
    public var resolveEvery: Duration?
    /// What the backend speaks: HTTP/1.1 (by default), `h2` (HTTP/2 over TLS, ALPN) or `h2c`
    /// (HTTP/2 with prior knowledge). Either HTTP/2 goes through the gateway's HTTP/2 client: one
    /// multiplexed connection per event loop, streams instead of pooled connections.
    public var `protocol`: BackendProtocol = .http1
    /// For `https://` targets: the CA certificates (PEM) their certificates must chain to, a
    /// private CA's; none trusts the system's store.
    public var caFile: PolicyFile?

    public init(
        name: String, targets: [BackendTarget], connectTimeout: Duration = .seconds(2), timeout: Duration = .seconds(30),
        rateLimit: RateLimitPolicy? = nil, maxConcurrent: Int? = nil, client: BackendClient? = nil
    ) {
        self.name = name
        self.targets = targets
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.rateLimit = rateLimit
        self.maxConcurrent = maxConcurrent
        self.client = client
        self.outlierDetection = targets.count > 1 ? OutlierDetectionPolicy() : nil
    }
}

/// The protocol a backend speaks (`backends.NAME.protocol`).
public enum BackendProtocol: String, Sendable, Hashable, CaseIterable {
    case http1
    /// HTTP/2 over TLS, agreed through ALPN: `https://` targets.
    case h2
    /// HTTP/2 over plain TCP with prior knowledge: `http://` targets.
    case h2c
}

/// The upstream clients a backend can be called through.
public enum BackendClient: String, Sendable, Hashable, CaseIterable {
    /// HTTP/1.1 on the gateway's own event loops, pooled per loop: the fast path, `http://` only.
    case nio
    /// libcurl on dedicated threads: `http://` and `https://`.
    case curl
}

/// A backend's base URL, split into what the proxy needs.
public struct BackendURL: Sendable, Hashable, CustomStringConvertible {
    public var scheme: String
    public var host: String
    public var port: Int
    /// No trailing slash; empty when the URL has no path.
    public var basePath: String

    public var description: String { "\(scheme)://\(hostForURL):\(port)\(basePath)" }

    /// Host as it appears in a URL (IPv6 literals bracketed).
    public var hostForURL: String { host.contains(":") ? "[\(host)]" : host }
}

/// A published API: where it is routed and which handler serves each version.
public struct ServicePolicy: Sendable, Hashable {
    public var name: String
    /// Path prefix; may hold one `{version}` segment, e.g. `/api/{version}/stockquote`.
    public var path: String
    /// When set, only requests for this host (the `Host` header without port) are routed here.
    public var host: String?
    public var versions: [Int: VersionPolicy]
    /// The version served when a request names none.
    public var defaultVersion: DefaultVersion
    /// The ways its callers may authenticate, any one of which admits a request; empty for
    /// `auth: none` (anyone may call it).
    public var auth: [AuthScheme] = []
    /// Which issuers' tokens it takes and what they must say, for `auth: jwt`.
    public var jwt: ServiceJWTPolicy?
    /// The region and service name SigV4 signatures are scoped to, for `auth: sigv4`.
    public var sigv4: ServiceSigV4Policy?
    /// For requests no key authenticated (`auth: none`): each client address gets this limit.
    public var addressRateLimit: RateLimitPolicy?
    /// Whether a path segment may hold an encoded slash or backslash (`%2F`, `%5C`), forwarded as
    /// is. Off by default: backends disagree on whether one separates segments, which is how a
    /// request escapes the route it was checked against. Turn it on only for a backend that needs
    /// such paths (resource names that contain slashes, say) and treats them as data.
    public var allowEncodedSlashes: Bool = false
    /// The active version map: which API version each app version (and platform) gets when the
    /// request names none. Empty: every such request gets ``defaultVersion``.
    public var compatibility: [CompatibilityBucket] = []
    /// Apps older than this get 426 Upgrade Required, whichever version they ask for.
    public var minimumClientVersion: Version?
    /// What a request without a client version gets when it names no API version either.
    public var missingClientVersion: MissingClientVersion = .default
    /// Whether (and how) this service's answers are cached; a version's own `cache` wins.
    public var cache: ServiceCachePolicy?
    /// This service's compression: off (`false`), or levels of its own.
    public var compression: ServiceCompressionPolicy?
    /// Which client addresses may call it (`allowFrom`, `denyFrom`), checked before authentication.
    public var addresses = AddressList()
    /// Which web origins' pages may call it from a browser.
    public var cors: CORSPolicy?
    /// Whether a proxied version may be asked to switch to WebSocket (RFC 6455): the upgrade goes
    /// through every stage like any request, and on the backend's `101` the two connections are
    /// joined. Off: the request is forwarded as a plain GET (its `Upgrade` dropped), as RFC 9110
    /// §7.8 lets a server ignore an upgrade.
    public var websocket = false
    /// The bounds on its upgraded connections and event streams (`limits`).
    public var streams = ServiceStreamLimits()
    /// For event streams: a comment line sent to the client after this long without an event, so
    /// that proxies and mobile networks in between do not take the connection for dead.
    public var heartbeat: Duration?

    /// The auth setting as the locator and the admin API publish it: `none`, or the schemes
    /// separated by commas (`jwt,signature`).
    public var authDescription: String { auth.isEmpty ? "none" : auth.map(\.rawValue).joined(separator: ",") }

    /// Whether requests' client version matters to this service (it has buckets or a minimum).
    public var readsClientVersion: Bool { !compatibility.isEmpty || minimumClientVersion != nil }
}

public enum DefaultVersion: Sendable, Hashable {
    case latest
    case version(Int)
}

/// What serves one version of a service.
public struct VersionPolicy: Sendable, Hashable {
    public var handler: HandlerPolicy
    /// The date (`2027-06-30`) after which this version may be withdrawn, published by the locator.
    public var deprecation: String?
    /// The media types of request and response bodies, published by the locator.
    public var input = "application/json"
    public var output = "application/json"
    /// This version's caching, instead of the service's.
    public var cache: ServiceCachePolicy?

    public init(handler: HandlerPolicy, deprecation: String? = nil) {
        self.handler = handler
        self.deprecation = deprecation
    }
}

public enum HandlerPolicy: Sendable, Hashable {
    /// Pass the request through to a backend, rewriting the path prefix.
    case proxy(ProxyPolicy)
    /// Fetch from one or more sources and reform their answers into the version's contract.
    case facade(FacadePolicy)
    /// A handler written in Swift, registered with the gateway by name.
    case code(CodeHandlerPolicy)

    /// The backends this handler sends requests to, in the policy's order.
    public var backends: [String] {
        switch self {
        case .proxy(let proxy): [proxy.backend]
        case .facade(let facade): facade.sources.map(\.backend)
        case .code(let code): code.backends
        }
    }
}

public struct ProxyPolicy: Sendable, Hashable {
    public var backend: String
    /// Replaces the matched service prefix (version segment included); `nil` forwards the request
    /// path unchanged. `"/"` in the file (stored as `""`) strips the prefix.
    public var rewrite: String?
}
