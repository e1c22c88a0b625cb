import PorticoPolicy

/// One service's rules, compiled: its rate limits for each tier and for addresses, and each
/// version's handler with its backend resolved.
///
/// The route stage finds these by the routed service's index (``CompiledService/index``), so the
/// stages after it look nothing up by name.
final class ServiceRules: Sendable {
    /// What one version is served by.
    struct Version: Sendable {
        let handler: HandlerPolicy
        /// The proxy's backend; `nil` only if the policy names one it does not define, which a
        /// validated policy never does (the request is then answered 502).
        let backend: CompiledBackend?
    }

    let service: CompiledService
    /// Tier name → the limit a key of that tier has on this service. Tiers without an exception
    /// for this service share one object across services.
    let tierLimits: [String: CompiledRateLimit]
    /// Each client address's limit, for requests no key authenticated.
    let addressLimit: CompiledRateLimit?
    let versions: [Int: Version]

    var name: String { service.name }

    init(
        _ service: CompiledService, tierDefaults: [String: CompiledRateLimit], tiers: [String: TierPolicy],
        backends: [String: CompiledBackend]
    ) {
        self.service = service
        var tierLimits = tierDefaults
        for (name, tier) in tiers {
            if let exception = tier.services[service.name] {
                tierLimits[name] = CompiledRateLimit(kind: .tier, name: name, policy: exception)
            }
        }
        self.tierLimits = tierLimits
        addressLimit = service.policy.addressRateLimit.map { CompiledRateLimit(kind: .address, name: service.name, policy: $0) }
        versions = service.policy.versions.mapValues { version in
            switch version.handler {
            case .proxy(let proxy): Version(handler: version.handler, backend: backends[proxy.backend])
            }
        }
    }
}
