import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

/// The resolve-version stage: which of the service's API versions serves the request, and so
/// which handler (and, for a proxy, which backend): the exchange's ``Destination``.
///
/// 1. When the service reads the client's version (it has compatibility buckets or a
///    `minimumClientVersion`), the app's version is read from `clients.versionHeader`: one that
///    is not a version gets 400 naming the header; one older than the minimum gets 426, whatever
///    version the request names; none at all gets 400 when the service says
///    `missingClientVersion: reject` and the request names no version.
/// 2. A version the request names (the `{version}` segment, else `apiVersion`) wins; one the
///    service does not have gets 404 listing those it has.
/// 3. Otherwise the bucket holding the app's version on its platform (``CompatibilityMap``), else
///    the service's default.
///
/// Answers decided by the client's headers carry `Vary` on them (``Exchange/vary``). It runs
/// after authentication, so a client that is not let in learns nothing about which versions exist.
struct VersionStage: RequestStage {
    func spanName(for exchange: Exchange) -> String? { exchange.routed == nil ? nil : "resolve version" }

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        guard let routed = exchange.routed else { return .proceed }
        let rules = routed.rules
        var mapped: Int?
        if let active = rules.active {
            exchange.vary = active.vary
            let headers = exchange.head.headers
            let policy = exchange.policy
            if let text = headers.first(name: policy.clientVersionHeader) {
                // The parser leaves whitespace after the value in it; it is not part of the value (RFC 9110 §5.5).
                guard let clientVersion = ClientVersion.parse(text[...].trimmingOptionalWhitespace()) else {
                    return .answer(.invalidClientVersion(header: policy.clientVersionHeader))
                }
                if let minimum = active.minimum, clientVersion < minimum {
                    return .answer(.upgradeRequired(service: rules.name, minimum: active.minimumText ?? ""))
                }
                if routed.requestedVersion == nil, !active.buckets.isEmpty {
                    mapped = active.buckets.apiVersion(
                        for: clientVersion, platform: Self.platform(in: headers, name: policy.clientPlatformHeader))
                }
            } else if routed.requestedVersion == nil, active.rejectsMissing {
                return .answer(.clientVersionRequired(header: policy.clientVersionHeader, service: rules.name))
            }
        }
        let version: Int?
        if let requested = routed.requestedVersion {
            version = Self.number(requested)
            // Every other version the request names must be the same one: a backend may read
            // the path's where the gateway read the query's, or the other way round.
            let others = routed.pathVersion == nil ? routed.queryVersions.dropFirst() : routed.queryVersions[...]
            if version != nil, others.contains(where: { Self.number($0) != version }) {
                return .answer(.conflictingVersions(service: rules.name))
            }
        } else {
            version = mapped ?? routed.service.defaultVersion
        }
        // A validated policy always has its default version and its buckets' versions, so only a
        // named one can be missing.
        guard let version, let served = rules.versions[version] else {
            let named = String(routed.requestedVersion ?? "\(routed.service.defaultVersion)")
            return .answer(.unknownVersion(named, service: rules.name, available: rules.versionNumbers))
        }
        exchange.version = version
        if routed.versionless { exchange.versionedPrefix = served.versionedPrefix }
        guard let destination = served.destination else {
            // Only a policy naming a backend it does not define compiles so; validation refuses one.
            let backend = if case .proxy(let proxy) = served.handler { proxy.backend } else { "unknown" }
            exchange.outcome.backend = backend
            return .answer(.badGateway(backend: backend))
        }
        exchange.destination = destination
        exchange.cacheRules = served.cache
        return .proceed
    }

    /// The version a request names, in its one canonical spelling: decimal digits without a
    /// leading zero, optionally after a `v` (`2`, `v2`). Anything else (`02`, `+2`, `2.0`, `V2`)
    /// names no version: the gateway and a backend parsing the forwarded path could disagree on it.
    static func number(_ text: Substring) -> Int? {
        var digits = text.utf8[...]
        if digits.first == UInt8(ascii: "v") { digits = digits.dropFirst() }
        guard digits.first != UInt8(ascii: "0") || digits.count == 1 else { return nil }
        return DecimalDigits.value(of: digits, maxDigits: 9)
    }

    /// The platform field's value in lowercase, as buckets name platforms; sliced, not copied,
    /// when it already is.
    static func platform(in headers: HTTPHeaders, name: String) -> Substring? {
        guard let field = headers.first(name: name) else { return nil }
        let value = field[...].trimmingOptionalWhitespace()
        guard !value.isEmpty else { return nil }
        let lowercase = value.utf8.allSatisfy { !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        return lowercase ? value : Substring(value.lowercased())
    }
}
