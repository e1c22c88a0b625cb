/// The service locator: a JSON document listing every service and version, generated from the
/// live policy, signed with Ed25519 so that a copy served by a CDN can be trusted.
///
/// Top-level `locator` section; without it the gateway publishes no locator.
public struct LocatorPolicy: Sendable, Hashable {
    /// Where the document is served.
    public var path = "/serviceLocator.json"
    /// Where the public key that verifies its signature is served, as a JWK Set (RFC 7517, 8037).
    public var publicKeyPath = "/.well-known/portico-locator-keys.json"
    /// `Cache-Control: public, max-age=` of the document.
    public var maxAge: Duration = .seconds(300)
    /// How long a signature stays valid after the document's max-age has run out: `expires` is
    /// `created + maxAge + signatureGrace`, so a copy a cache serves at the end of its freshness
    /// still verifies for a while.
    public var signatureGrace: Duration = .seconds(300)
    /// The base URL endpoints are published under on listeners that no environment names: the
    /// address clients reach, which behind a load balancer or CDN is not the listener's own.
    public var publicBaseURL: PublicBaseURL?
    /// Environments (`production`, `staging`) with their own base URLs, chosen by listener.
    public var environments: [LocatorEnvironment] = []
    /// The Ed25519 private key (PEM, PKCS#8) the document is signed with; unsigned without one.
    public var signingKey: PolicyFile?
    /// The `keyid` of the signature; by default derived from the public key (`ed25519-` and the
    /// first 16 hex digits of its SHA-256).
    public var keyID: String?
    /// A demo key, published with the policy: `portico check` warns about it.
    public var demoKey = false

    /// The base URL for a listener: its environment's, else the default.
    public func baseURL(forListener listener: String) -> (environment: String?, url: PublicBaseURL)? {
        if let environment = environments.first(where: { $0.listeners.contains(listener) }) {
            return (environment.name, environment.publicBaseURL)
        }
        return publicBaseURL.map { (nil, $0) }
    }
}

/// An absolute `http(s)` URL without query or fragment, and without a trailing slash.
public struct PublicBaseURL: Sendable, Hashable, CustomStringConvertible {
    public var scheme: String
    /// As written in a URL: lowercased, IPv6 literals bracketed.
    public var host: String
    /// `nil` for the scheme's default.
    public var port: Int?
    /// Empty, or starting with `/` and not ending with one.
    public var path: String

    public var description: String { "\(scheme)://\(host)\(port.map { ":\($0)" } ?? "")\(path)" }
}

/// One environment of the locator.
public struct LocatorEnvironment: Sendable, Hashable {
    public var name: String
    public var publicBaseURL: PublicBaseURL
    /// The listeners whose clients are in this environment.
    public var listeners: [String]
}
