/// Each key's share of the replay-protection store.
///
/// The store is shared by every key and fails closed when full, so without shares one key (say,
/// one extracted from a shipped app) could fill it and have every other key's signed requests
/// refused. A key's share bounds it to what its own traffic can honestly need.
extension Policy {
    /// The most live nonces `key` may hold at once.
    ///
    /// - A tier's explicit `nonceQuota` wins.
    /// - Otherwise a tiered key's share is what its limits can admit while a nonce is remembered:
    ///   for each signed service it may call, `burst + rate × lifetime`, where the lifetime is
    ///   ``SignaturePolicy/nonceLifetimeSeconds``. The rate limit is checked before a nonce is
    ///   recorded, so an honest key never reaches this share.
    /// - A key without a tier is not rate limited; it gets `signatures.defaultNonceQuota`, by
    ///   default a tenth of the store.
    ///
    /// Never more than the whole store.
    public func nonceQuota(for key: ClientKeyPolicy) -> Int {
        let capacity = signatures.nonceCacheSize
        guard let tierName = key.tier, let tier = tiers[tierName] else {
            return min(capacity, signatures.defaultNonceQuota ?? max(1, capacity / 10))
        }
        if let explicit = tier.nonceQuota { return min(capacity, explicit) }
        let lifetime = signatures.nonceLifetimeSeconds
        var total: Int64 = 0
        for service in services.values where service.auth.contains(.signature) && key.mayCall(service: service.name) {
            let limit = tier.limit(for: service.name)
            let period = max(1, limit.periodSeconds)
            total += Int64(limit.burst) + (Int64(limit.count) * lifetime + period - 1) / period
            if total >= Int64(capacity) { return capacity }
        }
        return max(1, Int(total))
    }
}
