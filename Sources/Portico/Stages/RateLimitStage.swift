import NIOCore
import PorticoPolicy

/// The rate-limit stage: the key's tier (or the client address) for this service, then the
/// backend's limit (``RateLimiter/draws(service:tier:keyID:clientAddress:backend:)``); then its
/// signature's nonce takes room in the key's share of the store every key shares. A request a
/// limit refuses keeps its nonce too: refused once, a captured request can never be admitted later.
///
/// A request the response cache may answer draws from the backend's limit later, in the cache
/// stage, and only if it goes to the backend.
///
/// The ``LimitStore`` decides, in this process or (fleet mode) in Redis; a remote decision
/// suspends the stage until its reply arrives on the connection's own event loop.
struct RateLimitStage: RequestStage {
    func spanName(for exchange: Exchange) -> String? { exchange.routed == nil ? nil : "rate limit" }

    let limits: any LimitStore

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let service = exchange.routed?.rules else { return .proceed }
        // A request without a key, on a service without an address limit, to a backend without
        // one, with no nonce to record, draws from nothing (``RateLimiter/draws``): most requests
        // on most routes. Said before the draws are gathered, which copies what they name.
        if exchange.keyID == nil, service.addressLimit == nil, exchange.pendingNonce == nil,
            exchange.cacheMayAnswer || exchange.destination?.proxyBackend?.rateLimit == nil
        {
            return .proceed
        }
        let (client, backend) = RateLimiter.draws(
            service: service, tier: exchange.tier, keyID: exchange.keyID, clientAddress: exchange.client.addressSubject,
            backend: exchange.cacheMayAnswer ? nil : exchange.destination?.proxyBackend)
        let request = LimitRequest(service: service.name, client: client, backend: backend, nonce: exchange.pendingNonce)
        guard !request.isEmpty else { return .proceed }
        // The store has the nonce now, whatever it decides.
        exchange.pendingNonce = nil
        switch limits.admit(request, on: eventLoop, span: exchange.trace?.redisSpan()) {
        case .decided(let outcome):
            return Self.apply(outcome, to: exchange)
        case .pending(let future):
            return .suspend(future.assumeIsolated().map { Self.apply($0, to: exchange) }.nonisolated())
        }
    }

    private static func apply(_ outcome: LimitOutcome, to exchange: Exchange) -> StageOutcome {
        switch outcome {
        case .refused(let problem):
            return .answer(problem)
        case .admitted(let applied):
            exchange.rateLimit = applied
            return .proceed
        }
    }
}
