import PorticoPolicy

/// One service's rules, compiled: each version's handler with its backend resolved.
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
    let versions: [Int: Version]

    var name: String { service.name }

    init(_ service: CompiledService, backends: [String: CompiledBackend]) {
        self.service = service
        versions = service.policy.versions.mapValues { version in
            switch version.handler {
            case .proxy(let proxy): Version(handler: version.handler, backend: backends[proxy.backend])
            }
        }
    }
}
