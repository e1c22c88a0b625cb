import NIOCore
import PorticoPolicy
import Tracing

/// Fleet mode's ``LimitStore``: every decision is Redis's (``FleetStore``, one script run per
/// request), and when Redis cannot answer (down, slow, its breaker open) the policy's
/// `cluster.onFailure` decides, with this gateway's own store (`local`) where it says so.
///
/// A request refused while Redis is away keeps its nonce in `local`: asking Redis again would only
/// fail again, and the nonce must be kept somewhere.
struct FleetLimitStore: LimitStore {
    let fleet: FleetStore
    let local: LocalLimitStore

    func admit(_ request: LimitRequest, on eventLoop: any EventLoop, span: @autoclosure () -> (any Span)?) -> LimitAnswer {
        guard !request.isEmpty else { return .decided(.admitted(nil)) }
        let draws = [request.client, request.backend].compactMap { $0 }
        let future = fleet.decide(draws, nonce: request.nonce, on: eventLoop, span: span()).map { verdict in
            Self.outcome(of: verdict, draws: draws, service: request.service)
        }.recover { _ in
            fallback(request)
        }
        return .pending(future)
    }

    /// What Redis's verdict means for the request. Whatever it decided, it decided the nonce's fate
    /// too (recorded, or its key marked).
    static func outcome(of verdict: FleetStore.Verdict, draws: [LimitDraw], service: String) -> LimitOutcome {
        var tightest: AppliedLimit?
        switch verdict {
        case .replayed:
            return .refused(.signatureReplayed())
        case .nonceQuotaExceeded(let retryAfter):
            return .refused(.nonceQuotaExceeded(retryAfter: retryAfter))
        case .limited(let index, let decisions):
            for (draw, decision) in zip(draws, decisions) {
                if let refusal = RateLimiter.apply(decision, of: draw, service: service, tightest: &tightest) {
                    return .refused(refusal)
                }
            }
            // A reply that names a limit but not its refusal is not one the script makes.
            return .refused(.rateLimited(AppliedLimit(limit: draws[index].limit, service: service, decision: decisions[index])))
        case .admitted(let decisions):
            for (draw, decision) in zip(draws, decisions) {
                _ = RateLimiter.apply(decision, of: draw, service: service, tightest: &tightest)
            }
            return .admitted(tightest)
        }
    }

    /// Redis did not answer in time (or its breaker is open): `cluster.onFailure`. Its `limits`
    /// rule applies to proxied requests and fetches alike: the local buckets, no limit, or 503; its
    /// `nonces` rule: the local store, or 503.
    private func fallback(_ request: LimitRequest) -> LimitOutcome {
        let onFailure = fleet.onFailure
        var applied: AppliedLimit?
        if request.client != nil || request.backend != nil {
            switch onFailure.limits {
            case .local:
                switch local.rateLimiter.draw(client: request.client, backend: request.backend, service: request.service) {
                case .success(let tightest): applied = tightest
                case .failure(let refusal): return refused(refusal, keeping: request.nonce)
                }
            case .allow:
                break
            case .deny:
                return refused(.sharedStateUnavailable("rate limits"), keeping: request.nonce)
            }
        }
        if let nonce = request.nonce {
            switch onFailure.nonces {
            case .deny: return refused(.sharedStateUnavailable("replay protection"), keeping: nonce)
            case .local: if let refusal = local.record(nonce) { return .refused(refusal) }
            }
        }
        return .admitted(applied)
    }

    private func refused(_ problem: Problem, keeping nonce: PendingNonce?) -> LimitOutcome {
        if let nonce { _ = local.record(nonce) }
        return .refused(problem)
    }
}
