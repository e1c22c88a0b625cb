import NIOCore
import PorticoPolicy
import PorticoRedis

/// The rate-limit stage: the key's tier (or the client address) for this service, then the
/// backend's limit (``RateLimiter``); then its signature's nonce takes room in the key's share of
/// the store every key shares. A request a limit refuses keeps its nonce too (recorded as it is
/// answered, ``GatewayHandler``): refused once, a captured request can never be admitted later.
///
/// In fleet mode (``FleetStore``) the same decisions are made by Redis, in one round trip: the
/// stage suspends on the reply, which arrives on the connection's own event loop. When Redis cannot
/// answer, the policy's `cluster.onFailure` decides.
struct RateLimitStage: RequestStage {
    let rateLimiter: RateLimiter
    let nonces: any NonceStore
    var fleet: FleetStore? = nil

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let service = exchange.routed?.rules else { return .proceed }
        if let fleet { return shared(fleet, exchange, service: service, on: eventLoop) }
        return local(exchange, service: service)
    }

    /// The gateway's own buckets and nonce store.
    private func local(_ exchange: Exchange, service: ServiceRules) -> StageOutcome {
        if let problem = localLimits(exchange, service: service) { return .answer(problem) }
        return localNonce(exchange).map(StageOutcome.answer) ?? .proceed
    }

    private func localLimits(_ exchange: Exchange, service: ServiceRules) -> Problem? {
        switch rateLimiter.admit(
            service: service, tier: exchange.tier, keyID: exchange.record.keyID, clientAddress: exchange.client.addressSubject,
            backend: exchange.backend)
        {
        case .failure(let problem): return problem
        case .success(let applied):
            exchange.rateLimit = applied
            return nil
        }
    }

    /// Records the admitted request's nonce in the key's share of the store.
    private func localNonce(_ exchange: Exchange) -> Problem? {
        guard let nonce = exchange.pendingNonce else { return nil }
        exchange.pendingNonce = nil
        return nonce.record(in: nonces, now: RequestAuthenticator.now())
    }

    private func shared(_ fleet: FleetStore, _ exchange: Exchange, service: ServiceRules, on eventLoop: any EventLoop) -> StageOutcome {
        let (client, backend) = RateLimiter.draws(
            service: service, tier: exchange.tier, keyID: exchange.record.keyID, clientAddress: exchange.client.addressSubject,
            backend: exchange.backend)
        let draws = [client, backend].compactMap { $0 }
        let nonce = exchange.pendingNonce
        guard !draws.isEmpty || nonce != nil else { return .proceed }
        let future = fleet.decide(draws, nonce: nonce, on: eventLoop).assumeIsolated().map { verdict -> StageOutcome in
            // Whatever Redis decided, it decided the nonce's fate too (recorded, or the key marked).
            exchange.pendingNonce = nil
            var tightest: AppliedLimit?
            switch verdict {
            case .replayed:
                return .answer(.signatureReplayed())
            case .nonceQuotaExceeded(let retryAfter):
                return .answer(.nonceQuotaExceeded(retryAfter: retryAfter))
            case .limited(let index, let decisions):
                for (draw, decision) in zip(draws, decisions) {
                    if let refusal = RateLimiter.apply(decision, of: draw, service: service.name, tightest: &tightest) {
                        return .answer(refusal)
                    }
                }
                // A reply that names a limit but not its refusal is not one the script makes.
                return .answer(.rateLimited(AppliedLimit(limit: draws[index].limit, service: service.name, decision: decisions[index])))
            case .admitted(let decisions):
                for (draw, decision) in zip(draws, decisions) {
                    _ = RateLimiter.apply(decision, of: draw, service: service.name, tightest: &tightest)
                }
                exchange.rateLimit = tightest
                return .proceed
            }
        }.flatMapErrorThrowing { _ in
            fallback(fleet.onFailure, exchange, service: service, limited: !draws.isEmpty)
        }.nonisolated()
        return .suspend(future)
    }

    /// Redis did not answer in time (or its breaker is open): the policy's `onFailure`.
    ///
    /// A request refused here keeps its nonce in this gateway's store (Redis has just failed to
    /// answer; asking it again would only fail again).
    private func fallback(_ onFailure: ClusterFailurePolicy, _ exchange: Exchange, service: ServiceRules, limited: Bool) -> StageOutcome {
        if limited, let problem = onFailure.limitsRefusal(local: { localLimits(exchange, service: service) }) {
            _ = localNonce(exchange)
            return .answer(problem)
        }
        if exchange.pendingNonce != nil {
            switch onFailure.nonces {
            case .deny:
                _ = localNonce(exchange)
                return .answer(.sharedStateUnavailable("replay protection"))
            case .local:
                if let problem = localNonce(exchange) { return .answer(problem) }
            }
        }
        return .proceed
    }
}
