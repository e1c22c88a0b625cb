/// What changes between two policies, by stable name: what a reload (or its dry run) reports.
///
/// Each section lists entries added, removed and changed, in name order. An entry is compared as a
/// whole value, so a key whose secret was rotated shows as changed, and nothing says how: the diff
/// names things, it never shows a value (secrets included).
///
/// The sections are a table (``sections``): a new part of the policy (facade sources, say) is
/// reported by one more line there, naming its entries and the value compared.
public struct PolicyDiff: Sendable, Hashable {
    /// One part of the policy: the names of its entries that were added, removed or changed.
    public struct Section: Sendable, Hashable {
        public var name: String
        public var added: [String]
        public var removed: [String]
        public var changed: [String]

        public var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty }
    }

    /// Every section, in ``Self/sections`` order, empty ones included (a client can rely on them).
    public var sections: [Section]

    public var isEmpty: Bool { sections.allSatisfy(\.isEmpty) }

    public subscript(name: String) -> Section? { sections.first { $0.name == name } }

    public init(from old: Policy, to new: Policy) {
        sections = Self.sections.map { name, entries in
            let before = entries(old)
            let after = entries(new)
            return Section(
                name: name,
                added: after.keys.filter { before[$0] == nil }.sorted(),
                removed: before.keys.filter { after[$0] == nil }.sorted(),
                changed: after.compactMap { key, value in before[key].flatMap { $0 == value ? nil : key } }.sorted())
        }
    }

    /// Each section's entries: stable name → the value compared.
    ///
    /// - `services`: routing and authentication (path, host, auth, default version, address
    ///   limit...); their versions and compatibility buckets are sections of their own, so adding
    ///   a version or a bucket does not also mark its service changed.
    /// - `versions`: `service/version` → its handler (and what the locator publishes of it).
    /// - `buckets`: the active version map, per service: `service: <range>` (with `on <platforms>`
    ///   for a platform's own bucket) → the API version it maps to; a bucket whose range moved is
    ///   removed and added, one that maps to another version is changed. `service.minimumClientVersion`
    ///   and `service.missingClientVersion` are entries too.
    /// - `keys`: by id, everything about the key (status, services, tier, secrets).
    /// - `limits`: every rate limit and cap by where it applies: `tiers.<tier>`,
    ///   `tiers.<tier>.services.<service>`, `backends.<backend>.rateLimit`,
    ///   `backends.<backend>.maxConcurrent`, `services.<service>.addressRateLimit`.
    /// - `backends`: URL, timeouts, client, limits.
    /// - `settings`: the singular sections (`listeners`, `limits`, `upstream`, `accessLog`,
    ///   `signatures`, `apiKeys`, `clients`, `locator`, `admin`, `cluster`, `cache`, `compression`).
    ///
    /// - `facades`: each facade version's sources, `service/version source <name>` → the source
    ///   (backend, request, format, field mappings), and its choices, `service/version active`,
    ///   `fallback`, `shadow`, `aggregate` and `contract`: switching the active source shows as one
    ///   changed entry. (The version itself shows in `versions` too, since its handler changed.)
    static let sections: [(name: String, entries: @Sendable (Policy) -> [String: AnyHashable])] = [
        ("services", { $0.services.mapValues { service in AnyHashable(ServiceWithoutVersions(service)) } }),
        ("versions", versions),
        ("buckets", buckets),
        ("keys", { $0.keys.mapValues(AnyHashable.init) }),
        ("limits", limits),
        ("backends", { $0.backends.mapValues(AnyHashable.init) }),
        ("settings", settings),
        ("facades", facades),
    ]

    private static func facades(_ policy: Policy) -> [String: AnyHashable] {
        var entries: [String: AnyHashable] = [:]
        for (name, service) in policy.services {
            for (number, version) in service.versions {
                guard case .facade(let facade) = version.handler else { continue }
                let prefix = "\(name)/\(number)"
                for source in facade.sources { entries["\(prefix) source \(source.name)"] = AnyHashable(source) }
                entries["\(prefix) contract"] = AnyHashable(facade.contract)
                if let active = facade.active { entries["\(prefix) active"] = AnyHashable(active) }
                if !facade.fallback.isEmpty { entries["\(prefix) fallback"] = AnyHashable(facade.fallback) }
                if let shadow = facade.shadow { entries["\(prefix) shadow"] = AnyHashable(shadow) }
                if !facade.aggregate.isEmpty { entries["\(prefix) aggregate"] = AnyHashable(facade.aggregate) }
            }
        }
        return entries
    }

    private struct ServiceWithoutVersions: Hashable {
        var service: ServicePolicy
        init(_ service: ServicePolicy) {
            self.service = service
            self.service.versions = [:]
            self.service.compatibility = []
            self.service.minimumClientVersion = nil
            self.service.missingClientVersion = .default
        }
    }

    private static func versions(_ policy: Policy) -> [String: AnyHashable] {
        var entries: [String: AnyHashable] = [:]
        for (name, service) in policy.services {
            for (number, version) in service.versions { entries["\(name)/\(number)"] = AnyHashable(version) }
        }
        return entries
    }

    private static func buckets(_ policy: Policy) -> [String: AnyHashable] {
        var entries: [String: AnyHashable] = [:]
        for (name, service) in policy.services {
            for bucket in service.compatibility {
                let platforms = bucket.platforms.isEmpty ? "" : " on " + bucket.platforms.sorted().joined(separator: ",")
                entries["\(name): \(bucket.clients)\(platforms)"] = AnyHashable(bucket.version)
            }
            if let minimum = service.minimumClientVersion {
                entries["\(name).minimumClientVersion"] = AnyHashable(minimum)
            }
            if service.missingClientVersion != .default {
                entries["\(name).missingClientVersion"] = AnyHashable(service.missingClientVersion)
            }
        }
        return entries
    }

    private static func limits(_ policy: Policy) -> [String: AnyHashable] {
        var entries: [String: AnyHashable] = [:]
        for (name, tier) in policy.tiers {
            entries["tiers.\(name)"] = AnyHashable([AnyHashable(tier.limit), AnyHashable(tier.nonceQuota)])
            for (service, limit) in tier.services { entries["tiers.\(name).services.\(service)"] = AnyHashable(limit) }
        }
        for (name, backend) in policy.backends {
            if let limit = backend.rateLimit { entries["backends.\(name).rateLimit"] = AnyHashable(limit) }
            if let cap = backend.maxConcurrent { entries["backends.\(name).maxConcurrent"] = AnyHashable(cap) }
        }
        for (name, service) in policy.services {
            if let limit = service.addressRateLimit { entries["services.\(name).addressRateLimit"] = AnyHashable(limit) }
        }
        return entries
    }

    private static func settings(_ policy: Policy) -> [String: AnyHashable] {
        var entries: [String: AnyHashable] = [
            "listeners": AnyHashable(policy.listeners), "limits": AnyHashable(policy.limits),
            "upstream": AnyHashable(policy.upstream), "accessLog": AnyHashable(policy.accessLog),
            "signatures": AnyHashable(policy.signatures), "apiKeys": AnyHashable(policy.apiKeys),
            "clients": AnyHashable(policy.clients),
        ]
        if let locator = policy.locator { entries["locator"] = AnyHashable(locator) }
        if let admin = policy.admin { entries["admin"] = AnyHashable(admin) }
        if let cluster = policy.cluster { entries["cluster"] = AnyHashable(cluster) }
        if let cache = policy.cache { entries["cache"] = AnyHashable(cache) }
        if let compression = policy.compression { entries["compression"] = AnyHashable(compression) }
        if !policy.trustedProxies.isEmpty { entries["trustedProxies"] = AnyHashable(policy.trustedProxies) }
        if !policy.jwt.issuers.isEmpty { entries["jwt"] = AnyHashable(policy.jwt) }
        if let tracing = policy.tracing { entries["tracing"] = AnyHashable(tracing) }
        return entries
    }
}
