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
    /// Its position in ``RouteTable/services``: what the gateway indexes its own per-service data
    /// by, so that a routed request finds it without a lookup by name.
    public let index: Int

    public var name: String { policy.name }

    /// The version served when the request names none.
    public var defaultVersion: Int {
        switch policy.defaultVersion {
        case .latest: latestVersion
        case .version(let version): version
        }
    }
}

/// Services ordered so the first match is the most specific one, and indexed by path segment.
public struct RouteTable: Sendable {
    /// The routing rule itself: a request goes to the first service in this order whose template
    /// matches its path and whose host, if it names one, is the request's. ``match(path:host:)``
    /// answers that from a trie rather than by scanning the list.
    public let services: [CompiledService]
    private let trie: RouteTrie

    init(services: [ServicePolicy]) {
        let ordered = services.compactMap { policy -> (ServicePolicy, PathTemplate, Int)? in
            guard let template = PathTemplate(policy.path), let latest = policy.versions.keys.max() else { return nil }
            return (policy, template, latest)
        }.sorted { lhs, rhs in
            // Longer prefixes first, then host-bound before host-free, then literal before {version}.
            if lhs.1.specificity != rhs.1.specificity {
                return lhs.1.specificity > rhs.1.specificity
            }
            if (lhs.0.host != nil) != (rhs.0.host != nil) { return lhs.0.host != nil }
            return !lhs.1.segments.contains(.version) && rhs.1.segments.contains(.version)
        }
        self.services = ordered.enumerated().map { index, service in
            CompiledService(policy: service.0, template: service.1, latestVersion: service.2, index: index)
        }
        self.trie = RouteTrie(self.services.map { RouteTrie.Entry(template: $0.template, host: $0.policy.host) })
    }

    public struct Match: Sendable {
        public let service: CompiledService
        public let path: PathTemplate.Match
    }

    /// Finds the service for a request path (without its query) and host (lowercased, without port).
    ///
    /// Costs a dictionary lookup per path segment (see ``RouteTrie``), not a template comparison
    /// per service.
    public func match(path: Substring, host: Substring?) -> Match? {
        guard let found = trie.match(path: path, host: host) else { return nil }
        return Match(service: services[found.rank], path: found.path)
    }
}
