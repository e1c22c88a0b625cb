import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoTLS
import PorticoUpstream

/// What the connection knows about its client before any request: the same for every exchange on it.
struct ClientConnection {
    /// The peer's address, for `X-Forwarded-For` and the access log.
    var address: String?
    /// What the per-address rate limit counts this client as (its /64 for IPv6).
    var addressSubject: String?
    /// What the TLS handshake established; nil on a plain-HTTP listener.
    var tls: TLSConnectionInfo?
    /// The certificate SNI chose for the connection; a request's `Host` must choose the same.
    var certificate: TLSCertificateChoice?
}

/// One request in progress and what the stages have found out about it so far.
///
/// Stages fill it in, in order; later stages read what earlier ones wrote. A class confined to the
/// connection's event loop, so that stages update it in place rather than copying a dozen fields
/// (and their reference counts) at each step, and a suspended stage's continuation can hold it.
final class Exchange {
    let head: HTTPRequestHead
    let requestID: String
    /// The policy the request is served by from head to end, read once at the head.
    let policy: CompiledPolicy
    let client: ClientConnection
    var keepAlive: Bool
    /// The body length the head announced (`nil`: none announced, or chunked).
    let declaredLength: Int?
    /// Whether a body follows the head (announced length over zero, or chunked).
    let expectsBody: Bool
    /// The `Expect` field of an HTTP/1.1 request (RFC 9110 §10.1.1: an HTTP/1.0 client's is ignored).
    let expectation: String?
    /// An HTTP/1.1 client sent `Expect: 100-continue` and has not been told to go on: it may
    /// never send its body, so a request answered early cannot be drained.
    var awaitingContinue: Bool
    /// The request's `.end` has arrived.
    var requestEnded = false
    /// Body bytes read and dropped after an early answer.
    var drainedBytes = 0
    var record: AccessRecord

    // Found by the stages, in order.
    /// Route stage: the service and the normalised path.
    var routed: RoutedRequest?
    /// Route stage: the gateway's own answer (the service locator), given instead of a handler's.
    var builtIn: BuiltInResponse?
    /// Authenticate stage: the header carrying an API key, which is not forwarded (it holds the secret).
    var credentialHeader: String?
    /// Authenticate stage: the `Content-Digest` a signed request's body must match before it is handled.
    var contentDigest: String?
    /// Authenticate stage: the name of the key's rate-limit tier.
    var tier: String?
    /// Authenticate stage: the signature's nonce, recorded by the rate-limit stage once admitted.
    var pendingNonce: PendingNonce?
    /// Version stage: the API version served and its handler.
    var version: Int?
    var handler: HandlerPolicy?
    /// Version stage: the `Vary` value naming the request fields that chose the version, when the
    /// active map read them (precomputed per service).
    var vary: String?
    /// Version stage: for a request that left out the `{version}` segment, the service path with
    /// the chosen version in it, which a proxy without `rewrite` forwards instead of the request's.
    var versionedPrefix: String?
    /// Version stage: the backend a `proxy` handler forwards to, compiled.
    var backend: CompiledBackend?
    /// Version stage: a `facade` version's compiled sources.
    var facade: CompiledFacade?
    /// Rate-limit stage: the most restrictive limit that admitted the request, reported in the response.
    var rateLimit: AppliedLimit?

    /// The request body, collected whole (a signed body is checked before anything is forwarded).
    var body: ByteBuffer?
    /// The handler's work in flight, cancelled if the client goes away; nil again once it ended.
    var task: (any UpstreamTask)?
    /// The backend concurrency slot this exchange holds while forwarding.
    var concurrencySlot: BackendConcurrency.Counter?
    var responseStarted = false

    init(head: HTTPRequestHead, requestID: String, policy: CompiledPolicy, client: ClientConnection) {
        self.head = head
        self.requestID = requestID
        self.policy = policy
        self.client = client
        let declaredLength = head.headers.first(name: "content-length").flatMap(Int.init)
        self.declaredLength = declaredLength
        let transferCoded = head.headers.contains(name: "transfer-encoding")
        self.expectsBody = (declaredLength ?? 0) > 0 || transferCoded
        // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding is treated as faultily framed,
        // and the connection closes after the response (a 1.0 peer may frame what follows otherwise).
        self.keepAlive = head.isKeepAlive && !(transferCoded && head.version == .http1_0)
        self.expectation = head.version == .http1_1 ? head.headers.first(name: "expect") : nil
        self.awaitingContinue = expectation.map { HeaderName.matches($0, "100-continue") } ?? false
        let path = head.uri.utf8.firstIndex(of: UInt8(ascii: "?")).map { head.uri[..<$0] } ?? head.uri[...]
        var record = AccessRecord(requestID: requestID, method: head.method.rawValue, path: path, client: client.address, started: .now())
        record.tlsVersion = client.tls?.version
        record.clientCertificate = client.tls?.peerSubject
        self.record = record
    }

    var snapshot: PolicySnapshot { policy.snapshot }

    /// Whether what is left of the body can be read and dropped after an early answer, so that the
    /// connection can carry the next request: it is small (``ExchangeStateMachine/maxDrainBytes``)
    /// and the client is not waiting for `100 Continue` before sending it.
    var bodyIsDrainable: Bool {
        !expectsBody || requestEnded || (!awaitingContinue && (declaredLength ?? 0) <= ExchangeStateMachine.maxDrainBytes)
    }

    /// Gives the backend slot back, once, whichever way the exchange ended.
    func releaseConcurrencySlot() {
        concurrencySlot?.release()
        concurrencySlot = nil
    }
}
