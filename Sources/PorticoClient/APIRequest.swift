import Foundation

/// One call through ``PorticoAPI``: the business parameters, nothing about URLs or signatures.
public struct APIRequest: Sendable, Hashable {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`…
    public var method: String
    /// The service's name in the locator (`stockQuote`).
    public var service: String
    /// An explicit API version; `nil` lets the gateway choose from the app's version.
    public var version: String?
    /// Appended to the service's URL (`/AAPL`), as text: characters a path cannot hold (and `%`) are
    /// percent-encoded.
    public var path: String
    public var query: [URLQueryItem]
    /// The body as sent (the façade's `post`/`put` encode a value as JSON).
    public var body: Data?
    /// Extra fields; `Content-Type` is `application/json` when there is a body and none is given.
    public var headers: [String: String]

    public init(
        method: String, service: String, version: String? = nil, path: String = "", query: [URLQueryItem] = [], body: Data? = nil,
        headers: [String: String] = [:]
    ) {
        self.method = method.uppercased()
        self.service = service
        self.version = version
        self.path = path
        self.query = query
        self.body = body
        self.headers = headers
    }

    /// RFC 9110 §9.2.2: repeating it has the effect of sending it once, so the façade may retry it.
    public var isIdempotent: Bool { ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"].contains(method) }

    /// The URL to send to: `base` (the service's endpoint) with ``path`` and ``query`` appended.
    func url(base: URL) throws(PorticoAPIError) -> URL {
        guard var components = URLComponents(url: base, resolvingAgainstBaseURL: true) else {
            throw .invalidRequest("the endpoint \(base.absoluteString) is not a URL")
        }
        if !path.isEmpty {
            // The path is text: `%` too is encoded, so "50%" reaches the backend as "50%".
            let allowed = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: ";%"))
            guard let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed) else {
                throw .invalidRequest("the path \(path) cannot be percent-encoded")
            }
            var basePath = components.percentEncodedPath
            if basePath.hasSuffix("/") { basePath.removeLast() }
            components.percentEncodedPath = basePath + (encoded.hasPrefix("/") ? "" : "/") + encoded
        }
        if !query.isEmpty {
            // Each name and value is text. `+` is encoded too: servers read a bare `+` in a query as
            // a space (the form encoding), so "a+b" would arrive as "a b". `&`, `=` and `;` would
            // split or join pairs.
            let allowed = CharacterSet.urlQueryAllowed.subtracting(CharacterSet(charactersIn: "+&=;%"))
            var pairs: [String] = []
            for item in query {
                guard let name = item.name.addingPercentEncoding(withAllowedCharacters: allowed),
                    let value = (item.value ?? "").addingPercentEncoding(withAllowedCharacters: allowed)
                else { throw .invalidRequest("the query item \(item.name) cannot be percent-encoded") }
                pairs.append(item.value == nil ? name : name + "=" + value)
            }
            let existing = components.percentEncodedQuery.map { [$0] } ?? []
            components.percentEncodedQuery = (existing + pairs).joined(separator: "&")
        }
        guard let url = components.url else { throw .invalidRequest("cannot make a URL from \(base.absoluteString) and \(path)") }
        return url
    }
}
