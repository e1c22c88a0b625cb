import NIOCore
import PorticoPolicy

/// The authenticate stage: the service's `auth` (``RequestAuthenticator``), from the head alone.
///
/// What it learns travels on in the exchange: the key id (for the access log and the rate limit),
/// the key's tier, the `Content-Digest` the body must match, and the signature's nonce, which the
/// rate-limit stage records only once the key's own limit has admitted the request.
struct AuthenticationStage: RequestStage {
    let nonces: any NonceStore
    let scheme: String

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let service = exchange.routed?.service.policy, service.auth != .none else { return .proceed }
        let authenticator = RequestAuthenticator(exchange.policy, nonces: nonces, scheme: scheme)
        switch authenticator.authenticate(exchange.head, service: service, hasBody: exchange.expectsBody, now: RequestAuthenticator.now()) {
        case .failure(let problem):
            return .answer(problem)
        case .success(let authentication):
            exchange.record.keyID = authentication.keyID
            exchange.contentDigest = authentication.contentDigest
            exchange.tier = authentication.tier
            exchange.pendingNonce = authentication.nonce
            if service.auth == .apiKey { exchange.credentialHeader = exchange.policy.apiKeyHeader }
            return .proceed
        }
    }
}
