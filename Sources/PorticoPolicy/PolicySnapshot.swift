/// The compiled, immutable policy the gateway serves from.
///
/// A request reads one snapshot when it starts and finishes on it, so a reload never changes the
/// rules under a request in flight. Lookups the hot path makes (route, backend) are precomputed.
public struct PolicySnapshot: Sendable {
    public let policy: Policy
    /// Not fatal, but worth an operator's attention (printed by `portico check`).
    public let warnings: [PolicyDiagnostic]
    public let routes: RouteTable

    public init(policy: Policy, warnings: [PolicyDiagnostic] = []) {
        self.policy = policy
        self.warnings = warnings
        self.routes = RouteTable(services: policy.services.values.sorted { $0.name < $1.name })
    }

    public var listeners: [ListenerPolicy] { policy.listeners }
    public var limits: LimitsPolicy { policy.limits }

    public func backend(named name: String) -> BackendPolicy? { policy.backends[name] }
}

/// A service compiled for routing.
public struct CompiledService: Sendable {
    public let policy: ServicePolicy
    public let template: PathTemplate
    /// Highest version number; what `default: latest` serves.
    public let latestVersion: Int

    public var name: String { policy.name }

    /// The version served when the request names none.
    public var defaultVersion: Int {
        switch policy.defaultVersion {
        case .latest: latestVersion
        case .version(let version): version
        }
    }
}

/// Services ordered so the first match is the most specific one.
public struct RouteTable: Sendable {
    public let services: [CompiledService]

    init(services: [ServicePolicy]) {
        self.services = services.compactMap { policy in
            guard let template = PathTemplate(policy.path), let latest = policy.versions.keys.max() else { return nil }
            return CompiledService(policy: policy, template: template, latestVersion: latest)
        }.sorted { lhs, rhs in
            // Longer prefixes first, then host-bound before host-free, then literal before {version}.
            if lhs.template.specificity != rhs.template.specificity {
                return lhs.template.specificity > rhs.template.specificity
            }
            if (lhs.policy.host != nil) != (rhs.policy.host != nil) { return lhs.policy.host != nil }
            return !lhs.template.segments.contains(.version) && rhs.template.segments.contains(.version)
        }
    }

    public struct Match: Sendable {
        public let service: CompiledService
        public let path: PathTemplate.Match
    }

    /// Finds the service for a request path (without its query) and host (lowercased, without port).
    public func match(path: Substring, host: Substring?) -> Match? {
        for service in services {
            if let wanted = service.policy.host, host.map({ $0 == wanted }) != true { continue }
            if let match = service.template.match(path) { return Match(service: service, path: match) }
        }
        return nil
    }
}
