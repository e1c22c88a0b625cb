import Foundation

/// A rate limit: on average `count` requests per `period`, with up to `burst` at once after a quiet
/// spell. Written `{ rate: 50/s, burst: 10 }` in the policy; enforced by GCRA (see
/// `docs/rate-limits.md`), which admits exactly that and no fixed-window doubling.
public struct RateLimitPolicy: Sendable, Hashable, CustomStringConvertible {
    public var count: Int
    /// One second, minute or hour.
    public var period: Duration
    public var burst: Int

    public init(count: Int, period: Duration, burst: Int) {
        self.count = count
        self.period = period
        self.burst = burst
    }

    /// The period in whole seconds (1, 60 or 3600).
    public var periodSeconds: Int64 { period.components.seconds }

    public var description: String {
        let unit =
            switch periodSeconds {
            case 1: "s"
            case 60: "m"
            default: "h"
            }
        return "\(count)/\(unit) burst \(burst)"
    }

    /// `50/s`, `100/m`, `1000/h` (also `/second`, `/minute`, `/hour`).
    static func parseRate(_ text: String) -> (count: Int, period: Duration)? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let count = Int(parts[0].trimmingCharacters(in: .whitespaces)) else { return nil }
        let period: Duration
        switch parts[1].trimmingCharacters(in: .whitespaces) {
        case "s", "sec", "second": period = .seconds(1)
        case "m", "min", "minute": period = .seconds(60)
        case "h", "hour": period = .seconds(3600)
        default: return nil
        }
        return (count, period)
    }
}

/// A key tier: the limit every key of the tier gets per service, with per-service exceptions.
/// Each key has a bucket of its own; the tier only says how big.
public struct TierPolicy: Sendable, Hashable {
    public var name: String
    public var limit: RateLimitPolicy
    /// Service name → the limit that replaces ``limit`` for calls to that service.
    public var services: [String: RateLimitPolicy]
    /// The most live nonces one key of the tier may hold in the replay store; `nil` derives it
    /// from the tier's limits (see ``Policy/nonceQuota(for:)``).
    public var nonceQuota: Int?
    /// Upgraded connections one key of the tier may hold open at once (per gateway); `nil`: no
    /// bound of the tier's own (the service's `limits.maxUpgraded` still applies).
    public var maxUpgraded: Int?

    public init(
        name: String, limit: RateLimitPolicy, services: [String: RateLimitPolicy], nonceQuota: Int? = nil, maxUpgraded: Int? = nil
    ) {
        self.name = name
        self.limit = limit
        self.services = services
        self.nonceQuota = nonceQuota
        self.maxUpgraded = maxUpgraded
    }

    /// The limit a key of this tier has when calling `service`.
    public func limit(for service: String) -> RateLimitPolicy {
        services[service] ?? limit
    }
}
