import NIOHTTP1
import PorticoPolicy

/// The route stage: which service, which version and which handler serve a request.
///
/// The path is normalised first (``PathNormalizer``): routes match, and backends receive, the
/// normal form, and paths that could escape a route are refused before any service is chosen.
/// Versions are passive here: from the service path's `{version}` segment, else from the
/// `apiVersion` query parameter, else the service's default.
struct RoutedRequest {
    let service: CompiledService
    /// The service's compiled limits and versions.
    let rules: ServiceRules
    let version: Int
    let handler: HandlerPolicy
    /// The version's backend, already resolved (see ``ServiceRules/Version/backend``).
    let backend: CompiledBackend?
    /// Normalised path after the service prefix (empty or starting with `/`).
    let remainder: Substring
    /// The whole normalised path.
    let path: Substring
    let query: Substring?
}

enum Route {
    static func resolve(_ head: HTTPRequestHead, in compiled: CompiledPolicy) -> Result<RoutedRequest, Problem> {
        let uri = head.uri
        guard uri.hasPrefix("/") else {
            return .failure(.badRequest("The request target must be a path (origin-form), such as /api/quotes."))
        }
        let rawPath: Substring
        let query: Substring?
        if let mark = uri.firstIndex(of: "?") {
            rawPath = uri[..<mark]
            query = uri[uri.index(after: mark)...]
        } else {
            rawPath = uri[...]
            query = nil
        }
        let normalized: PathNormalizer.Normalized
        switch PathNormalizer.normalize(rawPath) {
        case .failure(let rejection): return .failure(.badRequest(rejection.description))
        case .success(let value): normalized = value
        }
        let path = normalized.path
        let host = head.headers.first(name: "host").map(Self.hostWithoutPort)
        guard let match = compiled.snapshot.routes.match(path: path, host: host) else {
            return .failure(.notFound(path: String(path)))
        }
        let service = match.service
        let rules = compiled.rules(for: service)
        if normalized.hasEncodedSlash && !service.policy.allowEncodedSlashes {
            return .failure(
                .badRequest(
                    "The request path holds an encoded '/' or '\\' (%2F, %5C) inside a segment, which this service does not accept."))
        }
        let requested: Substring? = match.path.version ?? query.flatMap { Self.queryParameter("apiVersion", in: $0) }
        let version: Int
        let served: ServiceRules.Version
        if let requested {
            let digits = requested.first == "v" ? requested.dropFirst() : requested
            guard let number = Int(digits), let named = rules.versions[number] else {
                return .failure(.unknownVersion(String(requested), service: service.name, available: service.policy.versions.keys.sorted()))
            }
            version = number
            served = named
        } else {
            version = service.defaultVersion
            served = rules.versions[version]!
        }
        return .success(
            RoutedRequest(
                service: service, rules: rules, version: version, handler: served.handler, backend: served.backend,
                remainder: match.path.remainder, path: path, query: query))
    }

    /// The `Host` field's host, lowercased, without the port, as routes compare it.
    ///
    /// Hosts usually arrive in lowercase already; then the field's own text is sliced rather than
    /// copied into a new string.
    static func hostWithoutPort(_ host: String) -> Substring {
        let name: Substring
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            name = host[...close]
        } else {
            name = host.firstIndex(of: ":").map { host[..<$0] } ?? host[...]
        }
        let alreadyLowercase = name.utf8.allSatisfy { $0 < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        return alreadyLowercase ? name : Substring(name.lowercased())
    }

    static func queryParameter(_ name: String, in query: Substring) -> Substring? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts[0] == name { return parts.count > 1 ? parts[1] : "" }
        }
        return nil
    }
}
