import Foundation
import PorticoSigning

/// Signs requests for a Portico gateway: RFC 9421 HTTP Message Signatures with `hmac-sha256`,
/// and an RFC 9530 `Content-Digest` for bodies.
///
/// Configure one signer per key when the app starts and call it for every request. It builds the
/// signature base with the same code the gateway verifies with (`PorticoSigning`), so the two
/// cannot disagree on a byte.
///
/// ```swift
/// let signer = RequestSigner(
///     keyID: "ios-app", secret: secretFromKeychain,
///     identity: ClientIdentity(appVersion: "2.4.1", platform: "iphone"))
/// var request = URLRequest(url: URL(string: "https://api.example.com/api/2/stockquote/AAPL")!)
/// try request.sign(with: signer)
/// let (data, response) = try await URLSession.shared.data(for: request)
/// ```
///
/// What a signature covers: `@method`, `@authority`, `@path`, plus `@query` when the URL has a
/// query, `content-digest` when there is a body, the identity fields, and any of
/// ``coveredFields`` the request carries. Its parameters are `created`, a fresh random `nonce`
/// (the gateway refuses a nonce it has seen, so a captured request cannot be replayed), `keyid`
/// and, with a ``lifetime``, `expires`.
public struct RequestSigner: Sendable {
    /// The key id the gateway knows this app's secret by.
    public var keyID: String
    /// Sent with every request and covered by its signature; `nil` sends no identity fields.
    public var identity: ClientIdentity?
    /// The signature's label in `Signature-Input` and `Signature`.
    public var label = "sig1"
    /// Components every signature covers, before the request-dependent ones are added. The gateway's
    /// default policy requires these three.
    public var components: [ComponentIdentifier] = [.method, .authority, .path]
    /// Header fields to cover whenever a request carries them (e.g. `content-type`, `authorization`).
    public var coveredFields: [String] = []
    /// When set, signatures carry `expires` this far after `created`, and the gateway refuses them
    /// afterwards even inside its clock-skew window.
    public var lifetime: Duration?
    /// Whether signatures carry a nonce. The gateway requires one unless its policy says otherwise.
    public var includesNonce = true
    /// The digest algorithm of `Content-Digest`.
    public var digestAlgorithm: DigestAlgorithm = .sha256

    private let authenticator: HMACSHA256Authenticator
    private let clock: @Sendable () -> Date
    private let nonceSource: @Sendable () -> String

    /// - Parameters:
    ///   - keyID: the key id the gateway knows this app by.
    ///   - secret: the secret as `portico keygen` printed it; its UTF-8 bytes are the HMAC key,
    ///     exactly as the gateway reads its key file. Keep it in the Keychain, not in the app bundle.
    ///   - identity: the app version and platform to send and cover.
    ///   - clock: the time `created` is taken from; tests pass a fixed one.
    ///   - nonce: makes each signature's nonce; the default draws 128 random bits.
    public init(
        keyID: String, secret: String, identity: ClientIdentity? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }, nonce: @escaping @Sendable () -> String = RequestSigner.randomNonce
    ) {
        self.init(keyID: keyID, secretBytes: Array(secret.utf8), identity: identity, clock: clock, nonce: nonce)
    }

    /// A signer whose HMAC key is raw bytes (for keys shared as bytes, such as RFC 9421's examples).
    public init(
        keyID: String, secretBytes: some Sequence<UInt8>, identity: ClientIdentity? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }, nonce: @escaping @Sendable () -> String = RequestSigner.randomNonce
    ) {
        self.keyID = keyID
        self.identity = identity
        self.authenticator = HMACSHA256Authenticator(key: secretBytes)
        self.clock = clock
        self.nonceSource = nonce
    }

    /// 16 random bytes from the system's secure generator, base64url without padding.
    @Sendable public static func randomNonce() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Signs a request to `url`.
    ///
    /// - Parameters:
    ///   - method: the method as it will be sent (`GET`, `POST`…).
    ///   - url: the absolute URL as it will be sent; its percent-encoding is signed as is.
    ///   - headers: the fields the request already carries (only covered ones matter).
    ///   - body: the body that will be sent; `nil` or empty for none.
    /// - Returns: the fields to set on the request, replacing any of the same name: the identity
    ///   fields, `Content-Digest` when there is a body, `Signature-Input` and `Signature`.
    /// - Throws: ``ClientSigningError/invalidURL`` for a URL that is not absolute `http(s)`; a
    ///   ``ClientSigningError`` with an ``ClientSigningError/underlying`` reason when a covered field
    ///   is missing or its value is not ASCII (a signature base cannot carry other bytes, so such a
    ///   signature could never verify).
    public func sign(
        method: String, url: URL, headers: [(name: String, value: String)] = [], body: Data? = nil
    ) throws(ClientSigningError) -> [(name: String, value: String)] {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.percentEncodedHost, !host.isEmpty
        else { throw .badURL(url.absoluteString) }
        let authority = components.port.map { "\(host):\($0)" } ?? host
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        let target = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        return try sign(method: method, scheme: scheme, authority: authority, requestTarget: target, headers: headers, body: body)
    }

    /// Signs a request given in its parts, for HTTP clients that do not take a `URL`.
    ///
    /// - Parameters:
    ///   - authority: host and port as the `Host` field will carry them.
    ///   - requestTarget: path and query in origin form, exactly as sent (`/a%20b?q=1`).
    public func sign(
        method: String, scheme: String, authority: String, requestTarget: String,
        headers: [(name: String, value: String)] = [], body: Data? = nil
    ) throws(ClientSigningError) -> [(name: String, value: String)] {
        var added: [(name: String, value: String)] = identity?.fields ?? []
        if let body, !body.isEmpty {
            let digest = body.withUnsafeBytes { ContentDigest.value(for: $0, algorithm: digestAlgorithm, using: CryptoDigestFunction()) }
            added.append(("Content-Digest", digest))
        }
        // The request as it will be sent: its own fields, with the ones this signer sets replaced.
        // `Host` is the authority signed (one line on the wire), whatever the caller passed.
        let replaced = Set(added.map { $0.name.lowercased() } + ["signature-input", "signature", "host"])
        let fields = [("host", authority)] + headers.filter { !replaced.contains($0.name.lowercased()) } + added
        let request = HTTPRequestParts(method: method, scheme: scheme, authority: authority, requestTarget: requestTarget, fields: fields)

        let covered = coverage(of: request, hasBody: added.contains { $0.name == "Content-Digest" })
        let signed = try signature(for: request, covering: covered)
        return added + [("Signature-Input", signed.signatureInput), ("Signature", signed.signature)]
    }

    /// Signs `request` covering exactly `components`, in that order, with this signer's key,
    /// clock, nonce and lifetime: for protocols that fix their own coverage (and for checking
    /// against published vectors such as RFC 9421 B.2.5). Adds no fields; the request must already
    /// carry every covered one.
    ///
    /// - Returns: the values of `Signature-Input` and `Signature` under ``label``.
    public func signature(
        for request: some SignableRequest, covering components: [ComponentIdentifier]
    ) throws(ClientSigningError) -> (signatureInput: String, signature: String) {
        let created = Int64(clock().timeIntervalSince1970.rounded(.down))
        let input = SignatureInput(
            components: components, created: created, expires: lifetime.map { created + $0.components.seconds },
            nonce: includesNonce ? nonceSource() : nil, keyID: keyID)
        do {
            return try MessageSignature.sign(request, input: input, label: label, authenticator: authenticator)
        } catch {
            throw .cannotSign(error)
        }
    }

    /// ``components``, then `@query`, `content-digest`, the identity fields and whichever
    /// ``coveredFields`` the request carries, each once.
    private func coverage(of request: HTTPRequestParts, hasBody: Bool) -> [ComponentIdentifier] {
        var covered = components
        func add(_ component: ComponentIdentifier) {
            if !covered.contains(component) { covered.append(component) }
        }
        if request.requestTarget.contains("?") { add(.query) }
        if hasBody { add(.field("content-digest")) }
        for field in identity?.fields ?? [] { add(.field(field.name)) }
        for name in coveredFields where !request.fieldValues(name.lowercased()).isEmpty { add(.field(name)) }
        return covered
    }
}
