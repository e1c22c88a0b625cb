/// A service's CORS (`cors:`): which web origins may call it from a browser, with which methods
/// and headers, and what their pages may read of the answers.
///
/// The gateway answers preflights itself, before authentication and without a backend, and sets
/// `Access-Control-Allow-Origin` exactly once on every answer, whatever the backend sends.
public struct CORSPolicy: Sendable, Hashable {
    /// Exact origins (`https://app.example.com`), or `*` for any (never with ``credentials``).
    public var origins: [String]
    /// Methods a preflight may ask for; `GET`, `HEAD` and `POST` are always allowed.
    public var methods: [String] = ["GET", "HEAD", "POST"]
    /// Request fields a preflight may ask for (lowercased).
    public var headers: [String] = []
    /// Response fields a page may read beyond the safelisted ones.
    public var exposeHeaders: [String] = []
    /// Whether pages may send cookies or credentials and read the answer.
    public var credentials: Bool = false
    /// How long a browser may keep a preflight's answer.
    public var maxAge: Duration?

    public init(origins: [String]) {
        self.origins = origins
    }

    public var allowsAnyOrigin: Bool { origins.contains("*") }
}
