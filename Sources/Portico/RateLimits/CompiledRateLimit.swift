import PorticoPolicy

/// One rate limit of the policy as the limiter applies it: the GCRA parameters and the
/// `RateLimit-Policy` text, both worked out once when the policy is compiled.
///
/// A request that draws from it carries this object into its ``AppliedLimit``, so neither the
/// conversion to integer nanoseconds nor the header text is redone per request; only the
/// `RateLimit` field, which reports the bucket's state, is written per response.
final class CompiledRateLimit: Sendable {
    let kind: AppliedLimit.Kind
    /// The tier, backend or (for address limits) service name.
    let name: String
    /// The limit as the policy states it, for the problem's detail.
    let policy: RateLimitPolicy
    let gcra: GCRALimit
    /// The quota policy's identifier in both fields, e.g. `tier.standard`.
    let identifier: String
    /// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10 §3): quota `q` per window `w`
    /// seconds, the limit's sustained rate; e.g. `"tier.standard";q=100;w=60`.
    let policyField: String

    init(kind: AppliedLimit.Kind, name: String, policy: RateLimitPolicy) {
        self.kind = kind
        self.name = name
        self.policy = policy
        self.gcra = GCRALimit(policy)
        let identifier =
            switch kind {
            case .address: "address.\(name)"
            case .authFailures: "auth-failures"
            case .tier, .backend: "\(kind.rawValue).\(name)"
            }
        self.identifier = identifier
        self.policyField = "\"\(identifier)\";q=\(policy.count);w=\(policy.periodSeconds)"
    }
}
