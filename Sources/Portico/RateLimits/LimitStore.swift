import NIOCore
import Tracing

/// Where requests draw from their rate limits and record their signatures' nonces: this
/// process's buckets and nonce store (``LocalLimitStore``), or a fleet's, in Redis
/// (``FleetLimitStore``).
///
/// One call per request decides both, because the fleet's store decides both in one round trip,
/// and because a refused request must keep its nonce all the same (``PendingNonce``). Callers (the
/// rate-limit stage, a facade's or code handler's fetch, a refused request's nonce) do not know
/// which store they have: a local decision comes back at once, without a future, and a remote one
/// as a future on the caller's event loop.
protocol LimitStore: Sendable {
    /// Draws `request` from its limits, in order (the client's, then the backend's; the first
    /// refusal is the answer), and records its nonce whatever the limits decide.
    ///
    /// `span`: for a sampled request, a client span for a round trip to a shared store (made only
    /// by a store that makes one, which ends it).
    func admit(_ request: LimitRequest, on eventLoop: any EventLoop, span: @autoclosure () -> (any Span)?) -> LimitAnswer
}

extension LimitStore {
    func admit(_ request: LimitRequest, on eventLoop: any EventLoop) -> LimitAnswer {
        admit(request, on: eventLoop, span: nil)
    }
}

/// What one request draws from the limits, and the nonce it records.
struct LimitRequest {
    /// The service the request is for, named in a refusal and in the `RateLimit` fields.
    var service: String
    /// The client's bucket: its key's tier for the service, or its address.
    var client: LimitDraw?
    /// The backend's own limit.
    var backend: LimitDraw?
    /// A verified signature's nonce, not yet recorded.
    var nonce: PendingNonce?

    /// Whether there is nothing to decide.
    var isEmpty: Bool { client == nil && backend == nil && nonce == nil }
}

/// What the store decided for a ``LimitRequest``.
enum LimitOutcome {
    /// Every limit admitted the request and its nonce is recorded; the most restrictive limit, for
    /// the response's fields (nil when none applied).
    case admitted(AppliedLimit?)
    /// A limit, the nonce store or the unreachable shared store refused it (429, 503, 401).
    case refused(Problem)
}

/// A ``LimitOutcome`` now, or later.
enum LimitAnswer {
    case decided(LimitOutcome)
    /// Completes on the event loop the request was made on, and never fails: a store that cannot
    /// decide answers as its policy says (`cluster.onFailure`).
    case pending(EventLoopFuture<LimitOutcome>)

    func future(on eventLoop: any EventLoop) -> EventLoopFuture<LimitOutcome> {
        switch self {
        case .decided(let outcome): eventLoop.makeSucceededFuture(outcome)
        case .pending(let future): future
        }
    }
}

/// This gateway's own buckets (``RateLimiter``) and nonces (``NonceStore``), decided at once.
struct LocalLimitStore: LimitStore {
    let rateLimiter: RateLimiter
    let nonces: any NonceStore

    func admit(_ request: LimitRequest, on eventLoop: any EventLoop, span: @autoclosure () -> (any Span)?) -> LimitAnswer {
        .decided(decide(request))
    }

    func decide(_ request: LimitRequest) -> LimitOutcome {
        let limits = rateLimiter.draw(client: request.client, backend: request.backend, service: request.service)
        // Recorded whatever the limits decided: a request refused once must never pass later.
        let nonceRefusal = request.nonce.flatMap(record)
        switch limits {
        case .failure(let refusal): return .refused(refusal)
        case .success(let applied): return nonceRefusal.map(LimitOutcome.refused) ?? .admitted(applied)
        }
    }

    /// Records `nonce` in its key's share of the store; the refusal if it was there or found no room.
    func record(_ nonce: PendingNonce) -> Problem? {
        nonce.record(in: nonces, now: RequestAuthenticator.now())
    }
}
