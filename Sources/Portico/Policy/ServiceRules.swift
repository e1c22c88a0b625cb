import Foundation
import PorticoPolicy
import Version

/// One service's rules, compiled: its rate limits for each tier and for addresses, and each
/// version's handler with its backend resolved.
///
/// The route stage finds these by the routed service's index (``CompiledService/index``), so the
/// stages after it look nothing up by name.
final class ServiceRules: Sendable {
    /// What one version is served by. A class, made once per policy: the version stage takes it
    /// out of `versions` on every request, and a struct came out as a copy of each of its fields.
    final class Version: Sendable {
        let handler: HandlerPolicy
        /// What serves the version, compiled: the proxy with its backend, the facade with its
        /// sources, reformers and backends, or the code handler. `nil` only if the policy names a
        /// backend it does not define, which a validated policy never does (the request is then
        /// answered 502).
        let destination: Destination?
        /// The service's path with this version in its `{version}` segment (`/api/2/stockquote`),
        /// for a template that has one: what a request that left the segment out is forwarded as
        /// when the proxy does not rewrite, so the backend sees the version chosen.
        let versionedPrefix: String?
        /// The version's caching (its own `cache`, else its service's), for proxies and facades.
        let cache: CacheRules?

        init(handler: HandlerPolicy, destination: Destination?, versionedPrefix: String?, cache: CacheRules?) {
            self.handler = handler
            self.destination = destination
            self.versionedPrefix = versionedPrefix
            self.cache = cache
        }
    }

    let service: CompiledService
    /// Tier name → the limit a key of that tier has on this service. Tiers without an exception
    /// for this service share one object across services.
    let tierLimits: [String: CompiledRateLimit]
    /// Each client address's limit, for requests no key authenticated.
    let addressLimit: CompiledRateLimit?
    /// The service's address lists; `nil` when it has none, which the address-list stage then
    /// learns without copying them out of the service's policy (a retain and a release of each).
    let addresses: AddressList?
    let versions: [Int: Version]
    /// The versions the service has, sorted, for the 404 that lists them.
    let versionNumbers: [Int]
    /// What the version stage needs when the service reads the client's version (it has buckets
    /// or a minimum); `nil` otherwise, so that such services cost the stage nothing more.
    let active: ActiveVersioning?
    /// The service's response compression, when it compresses.
    let compression: CompressionRules?
    /// The fields never passed on for this service, lowercase, whichever scheme admits a request:
    /// an API key's field (it holds the secret), `Authorization` for a token service (a credential
    /// the backend has no use for), and the fields `forwardClaims` sets (a caller must not set them
    /// itself). Made once here, not for each request the authenticate stage admits.
    let withheldCredentials: [String]

    /// The active version map of one service, compiled.
    struct ActiveVersioning: Sendable {
        let buckets: CompatibilityMap
        let minimum: SemanticVersion?
        /// `minimum` as shown to the user.
        let minimumText: String?
        let rejectsMissing: Bool
        /// The `Vary` value of every answer whose version this map decided: the version header, and
        /// the platform header when a bucket is limited to some platforms.
        let vary: String
    }

    var name: String { service.name }

    init(
        _ service: CompiledService, tierDefaults: [String: CompiledRateLimit], tiers: [String: TierPolicy],
        backends: [String: CompiledBackend], clients: ClientsPolicy, compression: CompressionPolicy? = nil, apiKeyHeader: String
    ) {
        self.compression = CompressionRules(compression, service: service.policy.compression)
        var withheld: [String] = []
        if service.policy.auth.contains(.apiKey) { withheld.append(apiKeyHeader.lowercased()) }
        if service.policy.auth.contains(.jwt) { withheld.append("authorization") }
        for (_, field) in service.policy.jwt?.forwardClaims ?? [] { withheld.append(field.lowercased()) }
        withheldCredentials = withheld
        self.service = service
        var tierLimits = tierDefaults
        for (name, tier) in tiers {
            if let exception = tier.services[service.name] {
                tierLimits[name] = CompiledRateLimit(kind: .tier, name: name, policy: exception)
            }
        }
        self.tierLimits = tierLimits
        addresses = service.policy.addresses.isEmpty ? nil : service.policy.addresses
        addressLimit = service.policy.addressRateLimit.map { CompiledRateLimit(kind: .address, name: service.name, policy: $0) }
        let hasVersionSegment = service.template.segments.contains(.version)
        versions = Dictionary(
            uniqueKeysWithValues: service.policy.versions.map { number, version in
                let prefix = hasVersionSegment ? service.policy.path.replacingOccurrences(of: "{version}", with: String(number)) : nil
                let destination: Destination?
                switch version.handler {
                case .proxy(let proxy):
                    destination = backends[proxy.backend].map { .proxy(CompiledProxy(proxy, backend: $0)) }
                case .facade(let facade):
                    // Each fetch draws from its own source's backend limits, not the request.
                    destination = .facade(CompiledFacade(facade, service: service.name, version: number, backends: backends))
                case .code(let code):
                    destination = .code(code)
                }
                let cache: CacheRules? =
                    if case .code = version.handler { nil } else { CacheRules(service: service.policy, version: version) }
                return (number, Version(handler: version.handler, destination: destination, versionedPrefix: prefix, cache: cache))
            })
        versionNumbers = service.policy.versions.keys.sorted()
        let policy = service.policy
        if policy.readsClientVersion {
            let buckets = CompatibilityMap(policy.compatibility)
            let byPlatform = !buckets.byPlatform.isEmpty
            active = ActiveVersioning(
                buckets: buckets, minimum: policy.minimumClientVersion,
                minimumText: policy.minimumClientVersion.map(ClientVersion.describe),
                rejectsMissing: policy.missingClientVersion == .reject,
                vary: byPlatform ? "\(clients.versionHeader), \(clients.platformHeader)" : clients.versionHeader)
        } else {
            active = nil
        }
    }
}
