import NIOCore
import PorticoPolicy

/// The rate-limit stage: the key's tier (or the client address) for this service, then the
/// backend's limit (``RateLimiter``); then, with the request admitted, its signature's nonce takes
/// room in the store every key shares.
struct RateLimitStage: RequestStage {
    let rateLimiter: RateLimiter
    let nonces: any NonceStore

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let service = exchange.routed?.rules else { return .proceed }
        switch rateLimiter.admit(
            service: service, tier: exchange.tier, keyID: exchange.record.keyID, clientAddress: exchange.client.addressSubject,
            backend: exchange.backend)
        {
        case .failure(let problem): return .answer(problem)
        case .success(let applied): exchange.rateLimit = applied
        }
        // Only now, with the key's own limit passed, does its nonce take room in the shared store.
        if let nonce = exchange.pendingNonce, let problem = nonce.record(in: nonces, now: RequestAuthenticator.now()) {
            return .answer(problem)
        }
        return .proceed
    }
}
