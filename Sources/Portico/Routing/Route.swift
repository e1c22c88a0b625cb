import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

/// How a request's target finds its service (the route stage's work).
///
/// The path is normalised first (``PathNormalizer``): routes match, and backends receive, the
/// normal form, and paths that could escape a route are refused before any service is chosen.
enum Route {
    static func resolve(_ head: HTTPRequestHead, in compiled: CompiledPolicy) -> Result<RoutedRequest, Problem> {
        let uri = head.uri
        guard uri.utf8.first == UInt8(ascii: "/") else {
            return .failure(.badRequest("The request target must be a path (origin-form), such as /api/quotes."))
        }
        let rawPath: Substring
        let query: Substring?
        // By bytes: a string's own search walks it by characters, which an attacker's long target
        // makes costly ('?' is ASCII, so its byte position is a character boundary).
        if let mark = uri.utf8.firstIndex(of: UInt8(ascii: "?")) {
            rawPath = uri[..<mark]
            query = uri[uri.utf8.index(after: mark)...]
        } else {
            rawPath = uri[...]
            query = nil
        }
        if var query, query.withUTF8({ $0.contains(UInt8(ascii: "#")) }) {
            return .failure(.badRequest(PathNormalizer.Rejection.fragment.description))
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
        return .success(
            RoutedRequest(
                service: service, rules: rules, pathVersion: match.path.version,
                queryVersions: query.map { Self.queryParameters("apiVersion", in: $0) } ?? [], remainder: match.path.remainder, path: path,
                query: query, versionless: match.versionless))
    }

    /// The `Host` field's host, lowercased, without the port, as routes compare it.
    ///
    /// Hosts usually arrive in lowercase already; then the field's own text is sliced rather than
    /// copied into a new string.
    static func hostWithoutPort(_ host: String) -> Substring {
        // Found among the bytes: the `Character` view's search ran grapheme breaking over every
        // request's `Host`.
        let bytes = host.utf8
        let name: Substring
        if bytes.first == UInt8(ascii: "["), let close = bytes.firstIndex(of: UInt8(ascii: "]")) {
            name = host[...close]
        } else {
            name = bytes.firstIndex(of: UInt8(ascii: ":")).map { host[..<$0] } ?? host[...]
        }
        let alreadyLowercase = name.utf8.allSatisfy { $0 < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        return alreadyLowercase ? name : Substring(name.lowercased())
    }

    /// Every value of the query parameter `name`, in order (no array is made when there is none).
    static func queryParameters(_ name: String, in query: Substring) -> [Substring] {
        var values: [Substring] = []
        var bytes = query
        var name = name
        let found = bytes.withUTF8 { query in
            name.withUTF8 { name in
                var found: [Range<Int>] = []
                QueryPairs.forEach(in: query) { key, value in
                    guard key.count == name.count, UnsafeBufferPointer(rebasing: query[key]).elementsEqual(name) else { return }
                    found.append(value ?? key.upperBound..<key.upperBound)
                }
                return found
            }
        }
        for range in found { values.append(query.utf8Slice(range)) }
        return values
    }
}
