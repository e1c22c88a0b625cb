/// The rate-limit parts of the policy: backends' `rateLimit` and `maxConcurrent`, services'
/// `addressRateLimit`, and the `tiers` section.
extension PolicyDocumentReader {
    /// Largest `count` and `burst`; with a period of at most an hour, `burst × period` in
    /// nanoseconds stays far inside 64 bits, which the limiter's exact arithmetic relies on.
    static let maxRateCount = 1_000_000_000
    static let maxBurst = 1_000_000

    /// `{ rate: 50/s, burst: 10 }`; `burst` defaults to one period's worth of requests.
    func readRateLimit(_ value: PolicyValue) -> RateLimitPolicy? {
        guard let fields = value.fields(known: ["rate", "burst"]) else { return nil }
        return rateLimit(from: fields)
    }

    /// The `tiers` section: name → `{ rate, burst, services: { name: { rate, burst } } }`.
    func readTier(_ value: PolicyValue, name: String, services: Set<String>) -> TierPolicy? {
        guard let fields = value.fields(known: ["rate", "burst", "services", "nonceQuota", "maxUpgraded"]) else { return nil }
        let limit = rateLimit(from: fields)
        var overrides: [String: RateLimitPolicy] = [:]
        for (service, overrideValue) in fields.optional("services", { $0.mappingEntries() }) ?? [] {
            guard services.contains(service) else {
                let known = services.sorted().joined(separator: ", ")
                overrideValue.error("unknown service \"\(service)\"; expected one of: \(known.isEmpty ? "(no services defined)" : known)")
                continue
            }
            if let override = readRateLimit(overrideValue) { overrides[service] = override }
        }
        let nonceQuota = fields.optional("nonceQuota") { $0.int(in: 1...100_000_000) }
        let maxUpgraded = fields.optional("maxUpgraded") { $0.int(in: 0...1_000_000) }
        guard let limit else { return nil }
        return TierPolicy(name: name, limit: limit, services: overrides, nonceQuota: nonceQuota, maxUpgraded: maxUpgraded)
    }

    private func rateLimit(from fields: PolicyFields) -> RateLimitPolicy? {
        let rate = fields.required("rate") { value -> (count: Int, period: Duration)? in
            guard let text = value.string() else { return nil }
            guard let rate = RateLimitPolicy.parseRate(text), (1...Self.maxRateCount).contains(rate.count) else {
                value.error(
                    "expected a rate such as 50/s, 600/m or 10000/h (1 to \(Self.maxRateCount) requests), found \(value.describe())")
                return nil
            }
            return rate
        }
        let burst = fields.optional("burst") { $0.int(in: 1...Self.maxBurst) }
        guard let rate else { return nil }
        return RateLimitPolicy(count: rate.count, period: rate.period, burst: burst ?? min(rate.count, Self.maxBurst))
    }
}
