import NIOCore
import NIOHTTP1
import PorticoPolicy

/// The authenticate stage: the service's `auth` schemes, any one of which admits the request.
///
/// Which schemes are tried is decided by what the request carries: an API key field, a
/// `Signature-Input`/`Signature` pair, `Authorization: Bearer`, SigV4 (`Authorization:
/// AWS4-HMAC-SHA256` or a presigned query). The carried ones are tried in the service's order and
/// the first that verifies admits; if none does, the first one's problem answers. A request that
/// carries none gets its one scheme's own problem, or, for a service with several, a 401 naming them
/// all (``Problem/credentialsRequired(_:apiKeyHeader:)``).
///
/// What it learns travels on in the exchange: the scheme, the key id (for the access log and the
/// key's rate limit) or the token's subject (for the access log: a token has no key, so its
/// requests draw from the service's `addressRateLimit`), the key's tier, what the body must match (`Content-Digest`,
/// `x-amz-content-sha256`), the signature's nonce (recorded by the rate-limit stage once the key's
/// own limit has admitted the request), and the fields forwarded or withheld.
///
/// A client address that keeps failing (`limits.authFailures`: every 400 or 401 this stage gives
/// counts) is refused with 429 before anything is verified, so a flood of forgeries, each as
/// costly to check as a genuine request, costs the gateway almost nothing.
struct AuthenticationStage: RequestStage {
    func spanName(for exchange: Exchange) -> String? {
        exchange.routed.map { $0.service.policy.auth.isEmpty ? nil : "authenticate" } ?? nil
    }

    let nonces: any NonceStore
    let scheme: String
    /// Holds the failed-authentication buckets (in this gateway's memory, also in fleet mode).
    let rateLimiter: RateLimiter
    /// Every issuer's keys, shared by the gateway's listeners and kept across reloads.
    let keySets: JWTKeySets
    var metrics: GatewayMetrics? = nil

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        // The routed request, not its service's policy: a copy of that struct out of the class took
        // a reference count each way for every field it holds. The policy is passed on borrowed.
        guard let routed = exchange.routed, !routed.service.policy.auth.isEmpty else { return .proceed }
        let failures = exchange.policy.authFailureLimit
        if let refusal = rateLimiter.authFailuresRefusal(
            address: exchange.client.addressSubject, limit: failures, service: routed.service.name)
        {
            return .answer(refusal)
        }
        return attempt(exchange, routed: routed, mayWait: true, on: eventLoop)
    }

    private func attempt(_ exchange: Exchange, routed: RoutedRequest, mayWait: Bool, on eventLoop: any EventLoop) -> StageOutcome {
        let service = routed.service
        let head = exchange.head
        let apiKeyHeader = exchange.policy.apiKeyHeader
        // The schemes the request carries credentials for are tried; when it carries none and the
        // service has one scheme, that one is, so that its own problem answers. Walked twice
        // rather than collected into an array for each request.
        let carriesAny = service.policy.auth.contains { Self.carries(head, scheme: $0, apiKeyHeader: apiKeyHeader) }
        guard carriesAny || service.policy.auth.count == 1 else {
            let header = exchange.snapshot.policy.apiKeys.header
            return refuse(exchange, service: service, scheme: nil, .credentialsRequired(service.policy.auth, apiKeyHeader: header))
        }
        var firstFailure: (AuthScheme, Problem)?
        let now = RequestAuthenticator.now()
        for scheme in service.policy.auth where !carriesAny || Self.carries(head, scheme: scheme, apiKeyHeader: apiKeyHeader) {
            switch verify(exchange, scheme: scheme, service: service.policy, now: now, mayWait: mayWait, on: eventLoop) {
            case .success(let authentication):
                admit(exchange, authentication, rules: routed.rules)
                return .proceed
            case .failure(let problem):
                if firstFailure == nil { firstFailure = (scheme, problem) }
            case .wait(let loaded):
                // The routed request is read again from the exchange once the keys have loaded.
                return .suspend(
                    loaded.hop(to: eventLoop).map { _ in
                        exchange.routed.map { attempt(exchange, routed: $0, mayWait: false, on: eventLoop) } ?? .proceed
                    })
            case .needsBody:
                return .awaitBody
            }
        }
        let (scheme, problem) = firstFailure!
        return refuse(exchange, service: service, scheme: scheme, problem)
    }

    private func verify(
        _ exchange: Exchange, scheme: AuthScheme, service: ServicePolicy, now: Int64, mayWait: Bool, on eventLoop: any EventLoop
    ) -> SchemeOutcome {
        switch scheme {
        case .apiKey, .signature:
            let authenticator = RequestAuthenticator(exchange.policy, nonces: nonces, scheme: self.scheme)
            switch authenticator.authenticate(
                exchange.head, scheme: scheme, service: service, hasBody: exchange.framing.expectsBody, now: now)
            {
            case .success(let authentication): return .success(authentication)
            case .failure(let problem): return .failure(problem)
            }
        case .jwt:
            return BearerAuthenticator(keySets: keySets, issuers: exchange.snapshot.policy.jwt.issuers)
                .authenticate(exchange.head, service: service, now: now, mayWait: mayWait, on: eventLoop)
        case .sigv4:
            return SigV4Authenticator(credentials: exchange.policy.credentials).authenticate(
                exchange.head, body: exchange.body, bodyArrived: exchange.framing.requestEnded, hasBody: exchange.framing.expectsBody,
                service: service, now: now)
        }
    }

    /// Whether `head` carries the credentials `scheme` reads.
    static func carries(_ head: HTTPRequestHead, scheme: AuthScheme, apiKeyHeader: String) -> Bool {
        switch scheme {
        case .apiKey: head.headers.contains(name: apiKeyHeader)
        case .signature: head.headers.contains(name: "signature-input") || head.headers.contains(name: "signature")
        case .jwt: BearerAuthenticator.token(in: head.headers) != nil
        case .sigv4: SigV4Credentials.isPresent(head)
        }
    }

    private func admit(_ exchange: Exchange, _ authentication: Authentication, rules: ServiceRules) {
        exchange.authScheme = authentication.scheme
        exchange.keyID = authentication.keyID
        exchange.subject = authentication.subject
        exchange.contentDigest = authentication.contentDigest
        exchange.payloadSHA256 = authentication.payloadSHA256
        exchange.tier = authentication.tier
        exchange.pendingNonce = authentication.nonce
        exchange.credentialFields = CredentialFields(dropped: rules.withheldCredentials, added: authentication.forwardedFields)
    }

    private func refuse(_ exchange: Exchange, service: CompiledService, scheme: AuthScheme?, _ problem: Problem) -> StageOutcome {
        // A genuine key refused (403: revoked, not allowed, a scope missing) is not a failed authentication.
        if problem.status == .unauthorized || problem.status == .badRequest {
            rateLimiter.recordAuthFailure(address: exchange.client.addressSubject, limit: exchange.policy.authFailureLimit)
        }
        exchange.authScheme = scheme
        metrics?.authenticationFailed(service: service.name, scheme: scheme, problem: problem)
        return .answer(problem)
    }
}
