extension PolicyDocumentReader {
    /// Largest `burst × period` (in nanoseconds) a shared limit may have: Redis runs the GCRA
    /// arithmetic in Lua, whose numbers are doubles, exact below 2⁵³.
    static let maxSharedBurstPeriodNanos: Int64 = 1 << 53

    /// `cluster: { redis: redis://host:port | rediss://host:port, caFile, passwordFile, database, timeout,
    /// onFailure: { limits, nonces } }`.
    func readCluster(_ value: PolicyValue) -> ClusterPolicy? {
        guard let fields = value.fields(known: ["redis", "caFile", "passwordFile", "database", "timeout", "onFailure"]) else { return nil }
        let address = fields.required("redis") { value -> RedisAddress? in
            guard let text = value.nonEmptyString() else { return nil }
            return readRedisAddress(text, at: value)
        }
        let password = fields.optional("passwordFile") { value -> Secret? in
            guard let path = value.filePath() else { return nil }
            switch Secret.read(file: path) {
            case .success(let text): return Secret(text)
            case .failure(let problem):
                value.error("the password file \(path) \(problem)")
                return nil
            }
        }
        let database = fields.optional("database", default: 0) { $0.int(in: 0...15) }
        let timeout = fields.optional("timeout", default: .milliseconds(50)) { value -> Duration? in
            guard let duration = value.duration() else { return nil }
            guard duration <= .seconds(10) else {
                value.error("expected at most 10s: every request that a shared limit applies to may wait this long")
                return nil
            }
            return duration
        }
        let onFailure = fields.optional("onFailure", default: ClusterFailurePolicy()) { value -> ClusterFailurePolicy? in
            guard let fields = value.fields(known: ["limits", "nonces"]) else { return nil }
            let limits = fields.optional("limits", default: .local) { $0.oneOf(ClusterFailurePolicy.Limits.allCases) }
            let nonces = fields.optional("nonces", default: .deny) { $0.oneOf(ClusterFailurePolicy.Nonces.allCases) }
            return ClusterFailurePolicy(limits: limits, nonces: nonces)
        }
        let caFile = fields.optional("caFile") { value -> PolicyFile? in
            guard let file = file(value) else { return nil }
            if let address, !address.tls {
                value.error("caFile applies to rediss:// (Redis over TLS) only; the address is \(address)")
                return nil
            }
            return file
        }
        guard let address else { return nil }
        var cluster = ClusterPolicy(redis: address, password: password, database: database, timeout: timeout)
        cluster.onFailure = onFailure
        cluster.caFile = caFile
        return cluster
    }

    private func readRedisAddress(_ text: String, at value: PolicyValue) -> RedisAddress? {
        let tls = text.hasPrefix("rediss://")
        guard tls || text.hasPrefix("redis://") else {
            value.error("expected redis://host:port (or rediss://host:port for TLS), found \(value.describe())")
            return nil
        }
        var rest = Substring(text.dropFirst(tls ? "rediss://".count : "redis://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("@") else {
            value.error(
                "expected redis://host:port without user, password or path (use passwordFile and database), found \(value.describe())")
            return nil
        }
        var host = rest
        var port = 6379
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                value.error("expected redis://[ipv6]:port, found \(value.describe())")
                return nil
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else {
                    value.error("expected redis://[ipv6]:port, found \(value.describe())")
                    return nil
                }
                port = number
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            guard let number = Int(rest[rest.index(after: colon)...]) else {
                value.error("expected a port number after the host, found \(value.describe())")
                return nil
            }
            port = number
        }
        guard !host.isEmpty else {
            value.error("expected a host in redis://host:port, found \(value.describe())")
            return nil
        }
        guard (1...65535).contains(port) else {
            value.error("expected a port in 1...65535, found \(port)")
            return nil
        }
        return RedisAddress(host: String(host), port: port, tls: tls)
    }

    /// With a cluster, every limit must be one Redis can compute exactly.
    func checkSharedLimits(_ policy: Policy, at value: PolicyValue) {
        var limits: [(String, RateLimitPolicy)] = []
        for (name, backend) in policy.backends { if let limit = backend.rateLimit { limits.append(("backend \(name)", limit)) } }
        for (name, service) in policy.services {
            if let limit = service.addressRateLimit { limits.append(("service \(name)'s addressRateLimit", limit)) }
        }
        for (name, tier) in policy.tiers {
            limits.append(("tier \(name)", tier.limit))
            for (service, limit) in tier.services { limits.append(("tier \(name) for \(service)", limit)) }
        }
        for (name, limit) in limits.sorted(by: { $0.0 < $1.0 }) {
            let (seconds, attoseconds) = limit.period.components
            let periodNanos = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            let (product, overflow) = Int64(limit.burst + 1).multipliedReportingOverflow(by: periodNanos)
            if overflow || product >= Self.maxSharedBurstPeriodNanos {
                value.error(
                    "\(name): burst × period is too large to be shared through Redis exactly (at most about 9×10⁶ request-seconds, e.g. burst 2500 per hour); lower the burst or the period"
                )
            }
        }
    }
}
