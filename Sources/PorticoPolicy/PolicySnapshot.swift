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
///
/// A class, immutable: every routed request holds its service (``RouteTable/Match``, the routed
/// request, the stages), and a struct holding the whole ``ServicePolicy`` cost some fifteen
/// reference-count operations at each of those copies where a class costs one.
public final class CompiledService: Sendable {
    public let policy: ServicePolicy
    public let template: PathTemplate
    /// Highest version number; what `default: latest` serves.
    public let latestVersion: Int
    /// Its position in ``RouteTable/services``: what the gateway indexes its own per-service data
    /// by, so that a routed request finds it without a lookup by name.
    public let index: Int

    init(policy: ServicePolicy, template: PathTemplate, latestVersion: Int, index: Int) {
        self.policy = policy
        self.template = template
        self.latestVersion = latestVersion
        self.index = index
    }

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
    /// The services in specificity order; each one's ``CompiledService/index`` is its position here.
    public let services: [CompiledService]
    /// The routing rule itself: a request goes to the first route in this order whose template
    /// matches its path and whose host, if it names one, is the request's. Every service has its
    /// own template as a route and, when that template has a `{version}` segment, the template
    /// without it too (`/api/stockquote` for `/api/{version}/stockquote`), where the version comes
    /// from the active map. ``match(path:host:)`` answers from a trie rather than by scanning.
    public let routes: [Route]
    private let trie: RouteTrie

    /// One way of reaching a service.
    public struct Route: Sendable {
        /// Index into ``RouteTable/services``.
        public let service: Int
        public let template: PathTemplate
        /// The service's `{version}` template with that segment left out.
        public let versionless: Bool
    }

    init(services: [ServicePolicy]) {
        let ordered = services.compactMap { policy -> (ServicePolicy, PathTemplate, Int)? in
            guard let template = PathTemplate(policy.path), let latest = policy.versions.keys.max() else { return nil }
            return (policy, template, latest)
        }.sorted { lhs, rhs in Self.precedes((lhs.0, lhs.1, false), (rhs.0, rhs.1, false)) }
        let services = ordered.enumerated().map { index, service in
            CompiledService(policy: service.0, template: service.1, latestVersion: service.2, index: index)
        }
        self.services = services
        var candidates = services.map { (service: $0.index, template: $0.template, versionless: false) }
        for service in services {
            if let versionless = service.template.withoutVersion {
                candidates.append((service.index, versionless, true))
            }
        }
        // A stable order: equal candidates keep the service order.
        let routes = candidates.enumerated().sorted { lhs, rhs in
            let left = (services[lhs.element.service].policy, lhs.element.template, lhs.element.versionless)
            let right = (services[rhs.element.service].policy, rhs.element.template, rhs.element.versionless)
            if Self.precedes(left, right) { return true }
            if Self.precedes(right, left) { return false }
            return lhs.offset < rhs.offset
        }.map { Route(service: $0.element.service, template: $0.element.template, versionless: $0.element.versionless) }
        self.routes = routes
        self.trie = RouteTrie(routes.map { RouteTrie.Entry(template: $0.template, host: services[$0.service].policy.host) })
    }

    /// Longer prefixes first, then host-bound before host-free, then literal before {version},
    /// then a service's own template before another's versionless one; ties keep name order.
    private static func precedes(_ lhs: (ServicePolicy, PathTemplate, Bool), _ rhs: (ServicePolicy, PathTemplate, Bool)) -> Bool {
        if lhs.1.specificity != rhs.1.specificity {
            return lhs.1.specificity > rhs.1.specificity
        }
        if (lhs.0.host != nil) != (rhs.0.host != nil) { return lhs.0.host != nil }
        if lhs.1.segments.contains(.version) != rhs.1.segments.contains(.version) { return !lhs.1.segments.contains(.version) }
        return !lhs.2 && rhs.2
    }

    public struct Match: Sendable {
        public let service: CompiledService
        public let path: PathTemplate.Match
        /// The path left the `{version}` segment out (the active map chooses the version).
        public let versionless: Bool
    }

    /// Finds the service for a request path (without its query) and host (lowercased, without port).
    ///
    /// Costs a binary search of a node's edges per path segment (see ``RouteTrie``), not a
    /// template comparison per service.
    public func match(path: Substring, host: Substring?) -> Match? {
        guard let found = trie.match(path: path, host: host) else { return nil }
        let route = routes[found.rank]
        return Match(service: services[route.service], path: found.path, versionless: route.versionless)
    }
}
