import PorticoPolicy
import PorticoSigning

/// A policy snapshot compiled into what requests read: everything a stage needs, already
/// resolved, so that the request path does no lookup by name, no parsing and no string building
/// that the policy alone determines.
///
/// - the routes (``PolicySnapshot/routes``, a trie) and, per routed service, its ``ServiceRules``:
///   tier and address limits, each version's handler and backend;
/// - each backend as a ``CompiledBackend``: origin, `Host` value, URL prefix, timeouts, client, limit;
/// - each rate limit as a ``CompiledRateLimit``: its `GCRALimit` and `RateLimit-Policy` text;
/// - the client keys as HMAC contexts (``Credentials``) and the signature coverage required
///   (``SignatureRequirements``);
/// - the API-key header's name in the lowercase form the forwarding filter compares with;
/// - the service locator's documents, with their `ETag`, digest and signature (``CompiledLocator``);
/// - per service, the compatibility buckets as sorted arrays (``CompatibilityMap``) and the `Vary`
///   value of the answers they decide.
///
/// Immutable once built. ``PolicyStore`` builds one per snapshot, off the request path, and
/// installs it; a request reads it once at its head (through its connection's
/// ``PolicyStore/Reader``) and keeps it to the end.
public final class CompiledPolicy: Sendable {
    public let snapshot: PolicySnapshot
    let credentials: Credentials
    /// Indexed by ``CompiledService/index``, parallel to the snapshot's ``RouteTable/services``.
    let services: [ServiceRules]
    let backends: [String: CompiledBackend]
    let signatureRequirements: SignatureRequirements
    /// `apiKeys.header`, lowercased: the field not forwarded upstream, since it holds the secret.
    let apiKeyHeader: String
    /// `clients.versionHeader` and `clients.platformHeader`: where the version stage reads an app's
    /// version and platform.
    let clientVersionHeader: String
    let clientPlatformHeader: String
    /// The service locator's documents, signed; `nil` when the policy publishes none.
    let locator: CompiledLocator?
    /// The metrics this policy's requests update (none for a policy compiled without a gateway).
    let requestMetrics: RequestMetrics?
    /// `limits.authFailures`: how many failed authentications a client address may cause.
    let authFailureLimit: CompiledRateLimit?
    /// The address lists of the keys that have one, by key id (empty when none has: then the
    /// key check costs a request nothing).
    let keyAddresses: [String: AddressList]
    /// The tracer of the policy's `tracing` section (none without one, or without a gateway):
    /// held weakly, the gateway's ``TracerRegistry`` owns it.
    private let tracerReference: WeakGatewayTracer
    var tracer: GatewayTracer? { tracerReference.value }

    public convenience init(_ snapshot: PolicySnapshot) {
        self.init(snapshot, metrics: nil)
    }

    /// - Parameter makeKey: the authenticator of each key's secret (tests count MACs through it).
    convenience init(_ snapshot: PolicySnapshot, makeKey: ([UInt8]) -> any MessageAuthenticator) {
        self.init(snapshot, metrics: nil, makeKey: makeKey)
    }

    /// - Parameters:
    ///   - metrics: what this policy's requests count into (the gateway's).
    ///   - targets: the state of the backends' targets, which outlives the policy (the gateway's).
    ///   - addresses: what the targets' host names resolved to (``ResolvedAddresses``); a target
    ///     whose name has addresses becomes one target per address.
    ///   - makeKey: the authenticator of each key's secret (tests count MACs through it).
    ///   - tracers: where the `tracing` section's tracer comes from (the gateway's).
    init(
        _ snapshot: PolicySnapshot, metrics: GatewayMetrics?, targets: TargetRegistry = TargetRegistry(),
        addresses: [String: [String]] = [:], makeKey: ([UInt8]) -> any MessageAuthenticator = Credentials.openSSLKey,
        tracers: TracerRegistry? = nil
    ) {
        let policy = snapshot.policy
        self.snapshot = snapshot
        credentials = Credentials(policy: policy, makeKey: makeKey)
        let backends = policy.backends.mapValues { CompiledBackend($0, registry: targets, addresses: addresses) }
        self.backends = backends
        // One compiled limit per tier for the services without an exception of their own.
        let tierDefaults = policy.tiers.mapValues { CompiledRateLimit(kind: .tier, name: $0.name, policy: $0.limit) }
        services = snapshot.routes.services.map {
            ServiceRules(
                $0, tierDefaults: tierDefaults, tiers: policy.tiers, backends: backends, clients: policy.clients,
                compression: policy.compression, apiKeyHeader: policy.apiKeys.header)
        }
        signatureRequirements = SignatureRequirements(
            policy.signatures, clientVersionHeader: policy.clients.versionHeader, clientPlatformHeader: policy.clients.platformHeader)
        apiKeyHeader = policy.apiKeys.header.lowercased()
        keyAddresses = policy.keys.filter { !$0.value.addresses.isEmpty }.mapValues(\.addresses)
        authFailureLimit = policy.limits.authFailures.map { CompiledRateLimit(kind: .authFailures, name: "", policy: $0) }
        clientVersionHeader = policy.clients.versionHeader
        clientPlatformHeader = policy.clients.platformHeader
        if let locator = policy.locator {
            // A key that cannot be read leaves the document unavailable (503) rather than unsigned:
            // the gateway's start and `portico check` report the file, so this is a key broken since.
            let key = try? LocatorSigning.key(for: snapshot)
            self.locator = CompiledLocator(
                policy, locator: locator, signingKey: key, keyUnreadable: locator.signingKey != nil && key == nil)
        } else {
            self.locator = nil
        }
        requestMetrics = metrics?.requestMetrics(for: snapshot)
        tracerReference = WeakGatewayTracer(value: policy.tracing.flatMap { tracers?.tracer(for: $0) })
    }

    /// The rules of a service the route table returned.
    func rules(for service: CompiledService) -> ServiceRules { services[service.index] }

    /// A service's rules by its policy name, for callers outside the request path (tools, tests);
    /// requests reach theirs through the route.
    func rules(named name: String) -> ServiceRules? { services.first { $0.name == name } }

    func backend(named name: String) -> CompiledBackend? { backends[name] }
}
