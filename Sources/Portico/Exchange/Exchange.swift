import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoTLS
import PorticoUpstream

/// What the connection knows about its client before any request: the same for every exchange on it.
///
/// A value whose fields live in one shared box, copied on write: every exchange takes a copy of
/// its connection's, and a copy of seven separate fields was seven retains and seven releases per
/// request where the box costs one of each. The fields change only while the connection is set up
/// (its address, its TLS handshake) and where `trustedProxies` names another client address.
struct ClientConnection {
    /// The fields. Never changed while shared (``update(_:)`` copies a shared box first), so a
    /// copy may cross threads as a plain value would.
    private final class Storage: @unchecked Sendable {
        var address: String?
        var addressSubject: String?
        var addressBytes: [UInt8]?
        var peerBytes: [UInt8]?
        var listener: String?
        var tls: TLSConnectionInfo?
        var certificate: TLSCertificateChoice?

        init(listener: String?) { self.listener = listener }

        init(copying other: Storage) {
            address = other.address
            addressSubject = other.addressSubject
            addressBytes = other.addressBytes
            peerBytes = other.peerBytes
            listener = other.listener
            tls = other.tls
            certificate = other.certificate
        }
    }

    private var storage: Storage

    init(listener: String? = nil) {
        storage = Storage(listener: listener)
    }

    private mutating func update<Value>(_ field: ReferenceWritableKeyPath<Storage, Value>, to value: Value) {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(copying: storage) }
        storage[keyPath: field] = value
    }

    /// The peer's address, for `X-Forwarded-For` and the access log.
    var address: String? {
        get { storage.address }
        set { update(\.address, to: newValue) }
    }
    /// What the per-address rate limit counts this client as (its /64 for IPv6).
    var addressSubject: String? {
        get { storage.addressSubject }
        set { update(\.addressSubject, to: newValue) }
    }
    /// The client address's bytes (4, or 16), for the address lists.
    var addressBytes: [UInt8]? {
        get { storage.addressBytes }
        set { update(\.addressBytes, to: newValue) }
    }
    /// The TCP peer's bytes, kept when `trustedProxies` may replace the address (``ClientAddressRule``).
    var peerBytes: [UInt8]? {
        get { storage.peerBytes }
        set { update(\.peerBytes, to: newValue) }
    }
    /// The listener the connection came in on (nil for connections made without one: harnesses).
    var listener: String? {
        get { storage.listener }
        set { update(\.listener, to: newValue) }
    }
    /// What the TLS handshake established; nil on a plain-HTTP listener.
    var tls: TLSConnectionInfo? {
        get { storage.tls }
        set { update(\.tls, to: newValue) }
    }
    /// The certificate SNI chose for the connection; a request's `Host` must choose the same.
    var certificate: TLSCertificateChoice? {
        get { storage.certificate }
        set { update(\.certificate, to: newValue) }
    }
}

/// What the authenticate stage changes in the fields a request is forwarded with.
struct CredentialFields {
    /// Names of fields left out (an API key's, `Authorization` for tokens, `forwardClaims`' own).
    var dropped: [String] = []
    /// Fields added (`forwardClaims`), after the client's.
    var added: [(name: String, value: String)] = []
}

/// One request in progress and what the stages have found out about it so far.
///
/// Stages fill it in, in order; later stages read what earlier ones wrote; the handler and the
/// response fill in its ``ExchangeOutcome``, and its access-log line (``AccessRecord``) is made
/// from it once it has ended. A class confined to the connection's event loop, so that stages
/// update it in place rather than copying a dozen fields (and their reference counts) at each
/// step, and a suspended stage's continuation can hold it.
final class Exchange: FramedExchange {
    let head: HTTPRequestHead
    let requestID: String
    /// The policy the request is served by from head to end, read once at the head.
    let policy: CompiledPolicy
    let client: ClientConnection
    let started: NIODeadline
    /// How the request is framed and how much of it has arrived (the state machine's).
    var framing: RequestFraming

    // Found by the stages, in order.
    /// Route stage: the service and the normalised path, or the service locator.
    var route: ExchangeRoute?
    /// Authenticate stage: the key that signed or carried the request (never its secret).
    var keyID: String?
    /// Authenticate stage: the request fields not forwarded (those carrying a secret or a token, and
    /// those the gateway sets from a token's claims) and the fields it adds.
    var credentialFields = CredentialFields()
    /// Authenticate stage: the scheme that admitted the request, and whom a token speaks for.
    var authScheme: AuthScheme?
    var subject: String?
    /// Authenticate stage: the SHA-256 a SigV4 request's body must have before it is handled.
    var payloadSHA256: [UInt8]?
    /// Authenticate stage: the `Content-Digest` a signed request's body must match before it is handled.
    var contentDigest: String?
    /// Authenticate stage: the name of the key's rate-limit tier.
    var tier: String?
    /// Authenticate stage: the signature's nonce, recorded by the rate-limit stage once admitted.
    var pendingNonce: PendingNonce?
    /// Version stage: the API version served.
    var version: Int?
    /// Version stage: the `Vary` value naming the request fields that chose the version, when the
    /// active map read them (precomputed per service).
    var vary: String?
    /// Version stage: for a request that left out the `{version}` segment, the service path with
    /// the chosen version in it, which a proxy without `rewrite` forwards instead of the request's.
    var versionedPrefix: String?
    /// Route stage (the locator's answer) or version stage (the version's handler).
    var destination: Destination?
    /// Rate-limit stage: the most restrictive limit that admitted the request, reported in the response.
    var rateLimit: AppliedLimit?
    /// Version stage: the version's caching, when it caches.
    var cacheRules: CacheRules?
    /// Cache stage: whether the cache answers, and how the request goes to the backend if not.
    var cache: ExchangeCache?
    /// The `Cache-Status` field (RFC 9211) the answer carries, once the cache has had its say.
    var cacheStatus: String?
    /// CORS stage: what the answer's `Access-Control-*` fields say, for a service with `cors`.
    var cors: CORSDecision?

    /// The request body, collected whole (a signed body is checked before anything is forwarded).
    var body: ByteBuffer?
    /// What an HTTP/2 stream's extended CONNECT asked to tunnel (its `:protocol`, RFC 8441);
    /// `nil` for every other request.
    var tunnelProtocol: String?
    /// The handler's work in flight, cancelled if the client goes away; nil again once it ended.
    var task: (any UpstreamTask)?
    /// The backend concurrency slot this exchange holds while forwarding.
    var concurrencySlot: BackendConcurrency.Counter?
    /// How the exchange went, as far as it has gone.
    var outcome = ExchangeOutcome()
    /// The backend's trailer fields, passed on at the response's end to an HTTP/2 client (gRPC's
    /// status); an HTTP/1.1 client gets none.
    var responseTrailers: HTTPHeaders?
    /// The request's trace, when the policy traces (`tracing:`).
    var trace: ExchangeTrace?

    init(head: HTTPRequestHead, requestID: String, policy: CompiledPolicy, client: ClientConnection) {
        self.head = head
        self.requestID = requestID
        self.policy = policy
        self.client = client
        self.started = .now()
        self.framing = RequestFraming(head: head, maxBodyBytes: policy.snapshot.limits.maxBodyBytes)
    }

    var snapshot: PolicySnapshot { policy.snapshot }

    /// Whether the response cache may answer this request: its version caches and it is a GET
    /// or HEAD, not asking to switch protocols (a WebSocket handshake's answer is a connection,
    /// not a document). The rate-limit stage leaves the backend's limit to the cache stage for these.
    var cacheMayAnswer: Bool {
        cacheRules != nil && (head.method == .GET || head.method == .HEAD) && !framing.switchesProtocols
    }

    /// The service the request was routed to.
    var routed: RoutedRequest? {
        if case .service(let routed) = route { return routed }
        return nil
    }

    /// The request's path without its query, as the client sent it.
    var path: Substring {
        head.uri.utf8.firstIndex(of: UInt8(ascii: "?")).map { head.uri[..<$0] } ?? head.uri[...]
    }

    /// What of the handler's `events` may be written. A body part is never written before a head:
    /// whatever such bytes are, they are not an answer the client can read, so the handler's work
    /// is cancelled and the exchange fails. (The upstream clients refuse this themselves; this is
    /// the last line.) Nor is a head with a field that cannot be written as it is (a control byte
    /// in a value, from a backend behind libcurl, say, or a code handler): every handler's head
    /// passes here, which is why the client's pipeline needs no validating handler of NIO's, a hop
    /// each response part would otherwise take.
    ///
    /// nil when all of them may: the events are then written as they are (returning them would
    /// copy them, a retain and a release of each of their parts, on every event).
    func refusal(of events: UpstreamEvents) -> UpstreamEvents? {
        if let head = events.head {
            guard !head.areSendable else { return nil }
            task?.cancel()
            return UpstreamEvents(result: .failure(ResponseFraming.unsendableHead))
        }
        guard events.body != nil, !outcome.responseStarted else { return nil }
        task?.cancel()
        return UpstreamEvents(result: .failure(ResponseFraming.bodyBeforeHead))
    }

    /// A copy of what the stages found, as a new exchange no connection answers: what a
    /// background cache refresh is sent as (same route, key, version and destination).
    func detachedCopy() -> Exchange {
        let copy = Exchange(head: head, requestID: requestID, policy: policy, client: client)
        copy.route = route
        copy.keyID = keyID
        copy.credentialFields = credentialFields
        copy.authScheme = authScheme
        copy.subject = subject
        copy.tier = tier
        copy.version = version
        copy.vary = vary
        copy.versionedPrefix = versionedPrefix
        copy.destination = destination
        copy.cacheRules = cacheRules
        return copy
    }

    /// The handler's work has ended with `result`: its task and backend slot are let go and the
    /// outcome recorded. A failure comes back as the problem that answers it (502 or 504 naming
    /// the backend), for when no response has begun.
    func handlerEnded(_ result: Result<UpstreamMetrics, UpstreamError>) -> Result<Void, Problem> {
        task = nil
        releaseConcurrencySlot()
        switch result {
        case .success(let metrics):
            outcome.upstreamDuration = metrics.duration
            outcome.upstreamConnects = metrics.newConnections
            return .success(())
        case .failure(let error):
            outcome.failure = error.description
            let backend = outcome.backend ?? destination?.proxyBackend?.name ?? "unknown"
            return .failure(ProxyHandler.problem(for: error, backend: backend))
        }
    }

    /// The client went away: the handler's work stops, its backend slot is given back, and the
    /// outcome says so (499 when nothing had been sent).
    func abandon() {
        task?.cancel()
        task = nil
        releaseConcurrencySlot()
        outcome.failure = "client closed the connection"
        if !outcome.responseStarted { outcome.status = 499 }
    }

    /// Gives the backend slot back, once, whichever way the exchange ended.
    func releaseConcurrencySlot() {
        concurrencySlot?.release()
        concurrencySlot = nil
    }
}

/// What the route stage found a request to be for.
enum ExchangeRoute {
    /// A service of the policy.
    case service(RoutedRequest)
    /// The service locator's document or key, which the gateway answers itself.
    case locator
}

/// How an exchange went: filled in by its handler and by what the gateway writes back.
struct ExchangeOutcome {
    /// The status the client was sent (499 for a client that left before any).
    var status: UInt = 0
    var bytesSent = 0
    /// For a WebSocket stream: the bytes the client sent after the handshake.
    var bytesReceived: Int?
    /// For a stream: how it ended (``UpgradedStream/Ending``).
    var streamEnding: String?
    /// Whether the response's head has been written (so a failure can only cut it short).
    var responseStarted = false
    /// The backend that served or failed, when it is not the proxy's own (a facade's source's, a
    /// code handler's fetch).
    var backend: String?
    /// The facade source that served (or failed last), by its policy name.
    var source: String?
    var upstreamDuration: Duration?
    /// Connections the upstream client opened for this exchange (0 when it reused a pooled one).
    var upstreamConnects: Int?
    /// Attempts at the backend's targets (more than one when the request was retried).
    var attempts = 0
    /// The target that answered (or failed last), for a backend of several.
    var target: String?
    /// Why the exchange ended abnormally (for logs only; may name internal addresses).
    var failure: String?
    /// The type of the problem the gateway answered with, if it did.
    var problemType: String?
}
