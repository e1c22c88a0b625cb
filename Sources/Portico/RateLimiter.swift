import NIOCore
import PorticoPolicy

/// One limit that applied to a request, as the `RateLimit-Policy` and `RateLimit` fields and a
/// 429's problem describe it.
struct AppliedLimit {
    enum Kind: String {
        case tier, address, backend
    }

    let kind: Kind
    /// The tier, backend or (for address limits) service name.
    let name: String
    let service: String
    let policy: RateLimitPolicy
    let decision: RateLimitDecision

    /// The quota policy's identifier in both fields, e.g. `tier.standard`.
    var identifier: String { kind == .address ? "address.\(name)" : "\(kind.rawValue).\(name)" }

    /// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10 §3): quota `q` per window `w`
    /// seconds, the limit's sustained rate.
    var policyField: String { "\"\(identifier)\";q=\(policy.count);w=\(policy.periodSeconds)" }

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

    /// `clientAddress` is the subject of the address limit (``ClientAddress/rateLimitSubject(_:)``).
    ///
    /// Checks every limit that applies, in order: the client's (its key's tier for this service,
    /// or its address), then the backend's. The first refusal is the answer (429); otherwise the
    /// most restrictive limit is returned for the response's headers (nil when none applies).
    ///
    /// A request refused by the backend's limit has already drawn from the client's bucket: the
    /// client did send it, and the alternative (refunds) would let a client probe a busy backend
    /// for free.
    func admit(
        service: ServicePolicy, tier: TierPolicy?, keyID: String?, clientAddress: String?, backend: BackendPolicy?
    ) -> Result<AppliedLimit?, Problem> {
        let now = clock()
        var tightest: AppliedLimit?
        func apply(_ kind: AppliedLimit.Kind, _ name: String, _ policy: RateLimitPolicy, _ key: RateLimitKey) -> Problem? {
            let decision = store.acquire(key, limit: GCRALimit(policy), now: now)
            let applied = AppliedLimit(kind: kind, name: name, service: service.name, policy: policy, decision: decision)
            guard decision.allowed else { return .rateLimited(applied) }
            if tightest.map({ decision.remaining < $0.decision.remaining }) ?? true { tightest = applied }
            return nil
        }
        if let tier, let keyID {
            let policy = tier.limit(for: service.name)
            let key = RateLimitKey(scope: .tier, name: tier.name, service: service.name, subject: keyID)
            if let refusal = apply(.tier, tier.name, policy, key) { return .failure(refusal) }
        } else if keyID == nil, let policy = service.addressRateLimit {
            let key = RateLimitKey(scope: .address, name: service.name, subject: clientAddress ?? "unknown")
            if let refusal = apply(.address, service.name, policy, key) { return .failure(refusal) }
        }
        if let backend, let policy = backend.rateLimit {
            if let refusal = apply(.backend, backend.name, policy, RateLimitKey(scope: .backend, name: backend.name)) {
                return .failure(refusal)
            }
        }
        return .success(tightest)
    }
}
