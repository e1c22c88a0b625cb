import NIOCore
import NIOHTTP1
import PorticoPolicy

/// The authenticate stage: the service's `auth` (``RequestAuthenticator``), from the head alone.
///
/// What it learns travels on in the exchange: the key id (for the access log and the rate limit),
/// the key's tier, the `Content-Digest` the body must match, and the signature's nonce, which the
/// rate-limit stage records only once the key's own limit has admitted the request.
///
/// A client address that keeps failing (`limits.authFailures`: every 400 or 401 this stage gives
/// counts) is refused with 429 before anything is verified, so a flood of forgeries, each as
/// costly to check as a genuine request, costs the gateway almost nothing.
struct AuthenticationStage: RequestStage {
    let nonces: any NonceStore
    let scheme: String
    /// Holds the failed-authentication buckets (in this gateway's memory, also in fleet mode).
    let rateLimiter: RateLimiter

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let service = exchange.routed?.service.policy, service.auth != .none else { return .proceed }
        let failures = exchange.policy.authFailureLimit
        let address = exchange.client.addressSubject
        if let refusal = rateLimiter.authFailuresRefusal(address: address, limit: failures, service: service.name) {
            return .answer(refusal)
        }
        let authenticator = RequestAuthenticator(exchange.policy, nonces: nonces, scheme: scheme)
        switch authenticator.authenticate(
            exchange.head, service: service, hasBody: exchange.framing.expectsBody, now: RequestAuthenticator.now())
        {
        case .failure(let problem):
            // A genuine key refused (403: revoked, not allowed) is not a failed authentication.
            if problem.status == .unauthorized || problem.status == .badRequest {
                rateLimiter.recordAuthFailure(address: address, limit: failures)
            }
            return .answer(problem)
        case .success(let authentication):
            exchange.keyID = authentication.keyID
            exchange.contentDigest = authentication.contentDigest
            exchange.tier = authentication.tier
            exchange.pendingNonce = authentication.nonce
            if service.auth == .apiKey { exchange.credentialHeader = exchange.policy.apiKeyHeader }
            return .proceed
        }
    }
}
