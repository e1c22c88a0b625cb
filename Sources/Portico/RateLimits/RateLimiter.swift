import NIOCore
import PorticoPolicy

/// One limit that applied to a request, as the `RateLimit-Policy` and `RateLimit` fields and a
/// 429's problem describe it.
struct AppliedLimit {
    enum Kind: String, Sendable {
        case tier, address, backend
        /// `limits.authFailures`: failed authentications from one client address.
        case authFailures = "auth_failures"
    }

    /// The compiled limit drawn from, with its identifier and `RateLimit-Policy` text.
    let limit: CompiledRateLimit
    /// The service the request was for.
    let service: String
    let decision: RateLimitDecision

    var kind: Kind { limit.kind }
    /// The tier, backend or (for address limits) service name.
    var name: String { limit.name }
    var policy: RateLimitPolicy { limit.policy }

    /// The quota policy's identifier in both fields, e.g. `tier.standard`.
    var identifier: String { limit.identifier }

    /// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10 §3), built when the policy was
    /// compiled.
    var policyField: String { limit.policyField }

    /// `RateLimit` (same draft, §4): `r` requests available now, `t` seconds until the quota is
    /// whole again.
    var statusField: String { "\"\(identifier)\";r=\(decision.remaining);t=\(Self.seconds(decision.resetNanos))" }

    /// Whole seconds, rounded up: a client that waits this long is never early.
    static func seconds(_ nanos: Int64) -> Int64 { (nanos + 999_999_999) / 1_000_000_000 }
}

/// The rate-limit stage: per-key tier limits (or per-address limits for unauthenticated
/// services), then the backend's own limit; the backend's concurrency cap is taken when the
/// request is sent. State lives in the ``RateLimitStore`` and ``BackendConcurrency``, both owned by
/// the gateway, so policy reloads keep it.
public final class RateLimiter: Sendable {
    public let store: any RateLimitStore
    public let concurrency: BackendConcurrency
    private let clock: @Sendable () -> Int64

    /// - Parameter clock: monotonic nanoseconds; tests may pass their own.
    public init(
        store: any RateLimitStore = InMemoryRateLimitStore(), concurrency: BackendConcurrency = BackendConcurrency(),
        clock: @escaping @Sendable () -> Int64 = { Int64(bitPattern: NIODeadline.now().uptimeNanoseconds) }
    ) {
        self.store = store
        self.concurrency = concurrency
        self.clock = clock
    }

    /// The limiter's time now, for reading its buckets (the console's `peek`s).
    var now: Int64 { clock() }

    /// Checks every limit that applies, in order: the client's (its key's tier for this service,
    /// or its address), then the backend's. The first refusal is the answer (429); otherwise the
    /// most restrictive limit is returned for the response's headers (nil when none applies).
    ///
    /// The limits come compiled (``ServiceRules``, ``CompiledBackend``), so a request only draws
    /// from its buckets.
    ///
    /// A request refused by the backend's limit has already drawn from the client's bucket: the
    /// client did send it, and the alternative (refunds) would let a client probe a busy backend
    /// for free.
    ///
    /// - Parameters:
    ///   - service: the routed service's rules, which hold its tier and address limits.
    ///   - tier: the authenticated key's tier name, if it has one.
    ///   - keyID: the authenticated key; `nil` for `auth: none`, whose requests the address limit counts.
    ///   - clientAddress: the subject of the address limit (``ClientAddress/rateLimitSubject(_:)``).
    ///   - backend: the backend the request would be forwarded to.
    func admit(
        service: ServiceRules, tier: String?, keyID: String?, clientAddress: String?, backend: CompiledBackend?
    ) -> Result<AppliedLimit?, Problem> {
        let (client, backend) = Self.draws(service: service, tier: tier, keyID: keyID, clientAddress: clientAddress, backend: backend)
        return draw(client: client, backend: backend, service: service.name)
    }

    /// Draws from `client`'s bucket, then `backend`'s, in this process's store: the first refusal
    /// (429), or the most restrictive limit (nil when neither applies).
    func draw(client: LimitDraw?, backend: LimitDraw?, service: String) -> Result<AppliedLimit?, Problem> {
        guard client != nil || backend != nil else { return .success(nil) }
        let now = clock()
        var tightest: AppliedLimit?
        for draw in [client, backend] {
            guard let draw else { continue }
            let decision = store.acquire(draw.key, limit: draw.limit.gcra, now: now)
            if let refusal = Self.apply(decision, of: draw, service: service, tightest: &tightest) { return .failure(refusal) }
        }
        return .success(tightest)
    }

    /// The refusal (429) for a client address that has used up its failed authentications
    /// (`limits.authFailures`): its requests to authenticated services are then answered without
    /// any verification. Looks at the bucket without drawing from it: only failures draw.
    func authFailuresRefusal(address: String?, limit: CompiledRateLimit?, service: String) -> Problem? {
        guard let limit else { return nil }
        let decision = store.peek(Self.authFailuresKey(address), limit: limit.gcra, now: clock())
        return decision.allowed ? nil : .rateLimited(AppliedLimit(limit: limit, service: service, decision: decision))
    }

    /// Counts one failed authentication against the client address.
    func recordAuthFailure(address: String?, limit: CompiledRateLimit?) {
        guard let limit else { return }
        _ = store.acquire(Self.authFailuresKey(address), limit: limit.gcra, now: clock())
    }

    private static func authFailuresKey(_ address: String?) -> RateLimitKey {
        RateLimitKey(scope: .authFailures, name: "", subject: address ?? "unknown")
    }

    /// The draw of `backend`'s own limit, for a request the gateway makes on its own account (a
    /// facade's fetch from one of its sources, a shadow fetch, a code handler's fetch).
    static func draw(backend: CompiledBackend) -> LimitDraw? {
        backend.rateLimit.map { LimitDraw(limit: $0, key: backendKey(backend)) }
    }

    /// The buckets a request draws from, in order: the client's (its key's tier for this service,
    /// or its address), then the backend's. Shared by the in-process limiter and fleet mode's, so
    /// that both choose the same limits.
    static func draws(
        service: ServiceRules, tier: String?, keyID: String?, clientAddress: String?, backend: CompiledBackend?
    ) -> (client: LimitDraw?, backend: LimitDraw?) {
        var client: LimitDraw?
        if let tier, let keyID {
            // A tier the policy does not define sets no limit (a validated policy has none such).
            if let limit = service.tierLimits[tier] {
                client = LimitDraw(limit: limit, key: RateLimitKey(scope: .tier, name: limit.name, service: service.name, subject: keyID))
            }
        } else if keyID == nil, let limit = service.addressLimit {
            client = LimitDraw(limit: limit, key: RateLimitKey(scope: .address, name: service.name, subject: clientAddress ?? "unknown"))
        }
        return (client, backend.flatMap(draw(backend:)))
    }

    /// The bucket of `backend`'s own limit: one per backend, whether a proxied request, a facade
    /// or code-handler fetch, or a shadow draws from it, in memory or in Redis.
    static func backendKey(_ backend: CompiledBackend) -> RateLimitKey {
        RateLimitKey(scope: .backend, name: backend.name)
    }

    /// One limit's decision: the refusal (429) if it refused; otherwise it becomes the tightest
    /// limit when it leaves fewer requests than the tightest so far.
    static func apply(_ decision: RateLimitDecision, of draw: LimitDraw, service: String, tightest: inout AppliedLimit?) -> Problem? {
        let applied = AppliedLimit(limit: draw.limit, service: service, decision: decision)
        guard decision.allowed else { return .rateLimited(applied) }
        if tightest.map({ decision.remaining < $0.decision.remaining }) ?? true { tightest = applied }
        return nil
    }
}

/// One bucket a request draws from, under its compiled limit.
struct LimitDraw {
    let limit: CompiledRateLimit
    let key: RateLimitKey
}
