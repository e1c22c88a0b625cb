import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One call from an app to a signed, versioned API behind a Portico gateway.
///
/// Create one when the app starts, from what the gateway's operator gives you, and call it with
/// business parameters only:
///
/// ```swift
/// let api = PorticoAPI(
///     locator: URL(string: "https://api.example.com/serviceLocator.json")!,
///     pinnedKey: try PinnedLocatorKey(base64URL: "2D_KS1BTr4P3UC19HDzx_5UyhmQpDLqm5OO2lvWS6DQ"),
///     keyID: "ios-app", secret: SecretSource { try Keychain.string(for: "portico-secret") },
///     identity: ClientIdentity(appVersion: "2.4.1", platform: "iphone"))
/// let quote = try await api.get("stockQuote", path: "/AAPL", as: Quote.self)
/// ```
///
/// Each call:
/// 1. **resolves** the service's URL from the signed service locator (``ServiceLocatorClient``:
///    cached, verified against the pinned key, refreshed when stale). Without a version it is
///    the *active* endpoint, where the gateway picks the API version from the app's version
///    (``ServiceLocatorDocument/activeURL(service:)``); `version:` names one;
/// 2. **builds and signs** the request (``RequestSigner``): the identity fields, `Content-Type`,
///    the credentials' fields and, for a body (an `Encodable` value sent as JSON), its
///    `Content-Digest` are covered;
/// 3. **sends** it with `URLSession`;
/// 4. **decodes** a 2xx answer into the caller's `Decodable` type, or throws a ``PorticoAPIError``.
///
/// It recovers where that is safe: a `clock-skew` refusal sets a clock offset from the gateway's
/// `Date` (kept for later calls) and an idempotent request is signed again and retried once; an
/// idempotent request refused with 429 or 503 is retried once after its `Retry-After`, when that
/// is at most ``Configuration/maximumRetryDelay``. A `POST` or `PATCH` is never sent twice.
///
/// Identical GETs in flight (same URL and credentials; the identity is the façade's) share one
/// request, and GET answers are kept in a bounded cache by their `Cache-Control` and revalidated
/// with `If-None-Match` (see ``Configuration``).
public final class PorticoAPI: Sendable {
    /// The façade's identity, sent with every request and covered by its signature.
    public let identity: ClientIdentity
    /// The locator the endpoints come from.
    public let locator: ServiceLocatorClient
    let keyID: String
    let secret: SecretSource
    let credentials: (any RequestCredentials)?
    let configuration: Configuration
    /// Sends the calls (and, unless a transport was given, the locator's fetches).
    let sender: any HTTPSender
    let clock: @Sendable () -> Date
    let sleep: @Sendable (Duration) async throws -> Void

    /// The signer, made from the secret on first use.
    let signer = Locked<RequestSigner?>(nil)
    /// Seconds to add to the device clock to get the gateway's (learnt from a clock-skew refusal).
    let clockOffset = Locked<TimeInterval>(0)
    let cache: Locked<ResponseCache>
    /// Keyed by the cache key and the cache's generation, so that a GET made after a clearing or a
    /// write does not join one that was already out before it.
    let inFlight = InFlightRequests<SharedGet, APIResponseData>()

    /// - Parameters:
    ///   - locator: the gateway's service locator document (`locator.path` in its policy).
    ///   - pinnedKey: the gateway's locator key, compiled into the app (`portico locator-key`
    ///     prints it); documents it did not sign are refused.
    ///   - keyID, secret: the app's signing key; the secret is read once, when first needed.
    ///   - identity: the app's version and platform.
    ///   - credentials: per-request credentials of the app's account system, if any.
    ///   - session: the `URLSession` to send with, the locator's fetches included (unless
    ///     `locatorTransport` says otherwise); by default an ephemeral one whose own cache is off
    ///     (the façade caches, and must see the gateway's 304s).
    ///   - locatorTransport: how the locator document is fetched; by default through `session`.
    ///   - trust: which server certificates to accept, for the calls and the locator alike
    ///     (``ServerTrust``): the system's roots by default; a private CA, or pinned keys. On Linux a
    ///     trust other than ``ServerTrust/system`` sends through libcurl, and `session` is not used.
    ///   - clock: the device clock; tests move it.
    ///   - sleep: how a retry waits; tests pass their own.
    public init(
        locator: URL, pinnedKey: PinnedLocatorKey, keyID: String, secret: SecretSource, identity: ClientIdentity,
        credentials: (any RequestCredentials)? = nil, configuration: Configuration = Configuration(), session: URLSession? = nil,
        locatorTransport: (any ServiceLocatorTransport)? = nil, trust: ServerTrust = .system,
        clock: @escaping @Sendable () -> Date = { Date() },
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        let offset = clockOffset
        // One sender for both: an app that configures its session (a proxy, a protocol class, a
        // timeout) or a trust configures the locator's fetches with it.
        let sender = Self.sender(session: session, trust: trust)
        let transport = locatorTransport ?? SenderLocatorTransport(sender: sender)
        // The locator judges its signature's times by the corrected clock too.
        self.locator = ServiceLocatorClient(
            url: locator, transport: transport, configuration: configuration.locator,
            pinnedKey: pinnedKey, clock: { clock().addingTimeInterval(offset.withLock { $0 }) })
        self.keyID = keyID
        self.secret = secret
        self.identity = identity
        self.credentials = credentials
        self.configuration = configuration
        self.sender = sender
        self.clock = clock
        self.sleep = sleep
        self.cache = Locked(ResponseCache(entryLimit: configuration.cacheEntryLimit, byteLimit: configuration.cacheByteLimit))
    }

    /// GETs `path` of `service` and decodes the answer.
    ///
    /// - Parameters:
    ///   - service: the service's name in the locator.
    ///   - version: an API version to ask for; `nil` lets the gateway choose from the app's version.
    ///   - path: appended to the service's URL (`/AAPL`).
    public func get<Response: Decodable>(
        _ service: String, version: String? = nil, path: String = "", query: [URLQueryItem] = [], as type: Response.Type = Response.self
    ) async throws(PorticoAPIError) -> Response {
        try await send(APIRequest(method: "GET", service: service, version: version, path: path, query: query), as: type)
    }

    /// POSTs `body` as JSON and decodes the answer. Never retried: a POST is not idempotent.
    public func post<Body: Encodable, Response: Decodable>(
        _ service: String, version: String? = nil, path: String = "", query: [URLQueryItem] = [], body: Body,
        as type: Response.Type = Response.self
    ) async throws(PorticoAPIError) -> Response {
        let data = try Self.encode(body)
        return try await send(
            APIRequest(method: "POST", service: service, version: version, path: path, query: query, body: data), as: type)
    }

    /// PUTs `body` as JSON and decodes the answer.
    public func put<Body: Encodable, Response: Decodable>(
        _ service: String, version: String? = nil, path: String = "", query: [URLQueryItem] = [], body: Body,
        as type: Response.Type = Response.self
    ) async throws(PorticoAPIError) -> Response {
        let data = try Self.encode(body)
        return try await send(APIRequest(method: "PUT", service: service, version: version, path: path, query: query, body: data), as: type)
    }

    /// DELETEs `path` of `service` and decodes the answer (``NoContent`` when there is none).
    public func delete<Response: Decodable>(
        _ service: String, version: String? = nil, path: String = "", query: [URLQueryItem] = [],
        as type: Response.Type = NoContent.self
    ) async throws(PorticoAPIError) -> Response {
        try await send(APIRequest(method: "DELETE", service: service, version: version, path: path, query: query), as: type)
    }

    /// Sends any request and decodes its 2xx answer.
    public func send<Response: Decodable>(
        _ request: APIRequest, as type: Response.Type = Response.self
    ) async throws(PorticoAPIError)
        -> Response
    {
        try await response(for: request, as: type).value
    }

    /// Sends any request and decodes its 2xx answer, with the API version that served it, the
    /// request id and the rate limit's state (``APIResponse``).
    public func response<Response: Decodable>(
        for request: APIRequest, as type: Response.Type = Response.self
    ) async throws(PorticoAPIError) -> APIResponse<Response> {
        let answer = try await response(to: request)
        guard (200..<300).contains(answer.status) else {
            throw .answer(answer, retryAfter: answer.retryAfter(now: clock()))
        }
        let value: Response
        if type == NoContent.self, let none = NoContent() as? Response {
            value = none
        } else {
            do {
                value = try JSONDecoder().decode(type, from: answer.body)
            } catch {
                throw .decoding(error, status: answer.status)
            }
        }
        return APIResponse(
            value: value, status: answer.status, apiVersion: answer.header("x-api-version"), requestID: answer.header("x-request-id"),
            rateLimit: RateLimitState(rateLimit: answer.header("ratelimit"), policy: answer.header("ratelimit-policy")),
            headers: answer.headers)
    }

    /// Seconds added to the device clock when signing, learnt from the gateway's `Date` when it
    /// refused a signature for clock skew; 0 until then.
    public var gatewayClockOffset: TimeInterval { clockOffset.withLock { $0 } }

    /// Callers waiting for GETs in flight (diagnostics and tests).
    var requestsWaiting: Int { inFlight.waiting }

    /// Forgets every cached answer (at logout, say). The locator document stays.
    public func clearCache() {
        cache.withLock { $0.clear() }
    }

    /// The app's session, or one made for `trust`; on Linux, libcurl for a trust URLSession cannot
    /// honour there.
    static func sender(session: URLSession?, trust: ServerTrust) -> any HTTPSender {
        #if os(Linux)
        if !trust.isSystem { return CurlSender(trust: trust) }
        #endif
        return URLSessionSender(session: session ?? .porticoSession(trust: trust), trust: trust)
    }

    static func encode(_ body: some Encodable) throws(PorticoAPIError) -> Data {
        do {
            return try JSONEncoder().encode(body)
        } catch {
            throw .encoding(error)
        }
    }
}

/// The answer type for calls whose answer has no body worth reading (a 204, say).
public struct NoContent: Decodable, Sendable, Hashable {
    public init() {}
    public init(from decoder: any Decoder) throws {}
}
