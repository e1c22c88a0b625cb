import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import PorticoCrypto
import PorticoHTTP
import PorticoPolicy
import PorticoSigning

/// The service locator compiled for one policy snapshot: a document per public base URL, its
/// `ETag` and `Content-Digest`, and its Ed25519 signature, all made here rather than per request.
///
/// A request costs a path comparison, an `If-None-Match` comparison, a lock to read the current
/// signature and the `Age` field. The signature is made when the snapshot is compiled and again
/// only once the document it signed is no longer fresh (`created + maxAge`): a snapshot can live for
/// weeks, and its signature must not expire under it. `Age` tells caches (and
/// `ServiceLocatorClient`) how old that signed answer is, so the document is not kept fresh past
/// the signature's `expires` minus the grace.
final class CompiledLocator: Sendable {
    let path: String
    let publicKeyPath: String
    /// Listener name → the variant its clients get (listeners of one environment share one).
    private let variants: [String: Variant]
    /// The JWK Set (RFC 7517, RFC 8037 `OKP`/`Ed25519`) served at ``publicKeyPath``; `nil` unsigned.
    private let publicKeyBody: ByteBuffer?
    /// The signature's `keyid`.
    let keyID: String?

    /// A key is configured but could not be read: the document is not served (503).
    private let keyUnreadable: Bool

    /// `signingKey` is the policy's key, loaded; `nil` serves the document unsigned.
    init(_ policy: Policy, locator: LocatorPolicy, signingKey: Ed25519SigningKey?, keyUnreadable: Bool = false) {
        self.keyUnreadable = keyUnreadable
        path = locator.path
        publicKeyPath = locator.publicKeyPath
        let keyID = signingKey.map { locator.keyID ?? Self.defaultKeyID(for: $0.publicKey) }
        self.keyID = keyID
        let signer = signingKey.flatMap { key in keyID.map { Signer(key: key, keyID: $0) } }
        let maxAge = max(1, locator.maxAge.components.seconds)
        let grace = max(0, locator.signatureGrace.components.seconds)
        var byBase: [String: Variant] = [:]
        var variants: [String: Variant] = [:]
        for listener in policy.listeners {
            guard let (environment, base) = locator.baseURL(forListener: listener.name) else { continue }
            let key = "\(environment ?? "")\u{0}\(base)"
            let variant =
                byBase[key]
                ?? Variant(
                    body: LocatorDocument.json(policy, environment: environment, baseURL: base), signer: signer, maxAge: maxAge,
                    grace: grace, tag: LocatorTag.value(environment: environment))
            byBase[key] = variant
            variants[listener.name] = variant
        }
        self.variants = variants
        publicKeyBody = signingKey.map { key in
            let x = Base64URL.encode(key.publicKey)
            return ByteBuffer(
                string: #"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"\#(x)","kid":"\#(keyID ?? "")","alg":"EdDSA","use":"sig"}]}"#)
        }
    }

    /// `ed25519-` and the first 16 hex digits of the public key's SHA-256: stable for a key, and
    /// different for the next one, so clients can tell a rotation from a forgery in their logs.
    static func defaultKeyID(for publicKey: [UInt8]) -> String {
        let digest = publicKey.withUnsafeBytes { OpenSSLDigest().digest(.sha256, of: $0) }
        return "ed25519-" + digest.prefix(8).map { byte in String(byte, radix: 16).leftPadded(to: 2) }.joined()
    }

    /// Whether the request is for one of the locator's paths, and which answer it gets; `nil` when
    /// it is neither (every other request pays two prefix comparisons, and no clock read). Other
    /// methods than GET and HEAD get 405.
    func answer(
        _ head: HTTPRequestHead, listener: String, now: () -> Int64 = RequestAuthenticator.now
    ) -> Result<BuiltInResponse, Problem>? {
        let uri = head.uri
        let isDocument = Self.targets(uri, path)
        guard isDocument || Self.targets(uri, publicKeyPath) else { return nil }
        guard head.method == .GET || head.method == .HEAD else {
            return .failure(.methodNotAllowed(allowed: "GET, HEAD"))
        }
        let isHead = head.method == .HEAD
        if keyUnreadable { return .failure(.locatorUnavailable()) }
        if isDocument {
            guard let variant = variants[listener] else { return .failure(.notFound(path: path)) }
            return .success(variant.response(ifNoneMatch: head.headers[canonicalForm: "if-none-match"], head: isHead, now: now()))
        }
        guard let body = publicKeyBody else { return .failure(.notFound(path: publicKeyPath)) }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/jwk-set+json")
        headers.add(name: "Cache-Control", value: "public, max-age=3600")
        return .success(BuiltInResponse(status: .ok, headers: headers, body: isHead ? nil : body, contentLength: body.readableBytes))
    }

    /// `uri` is `path`, with or without a query.
    private static func targets(_ uri: String, _ path: String) -> Bool {
        guard uri.hasPrefix(path) else { return false }
        let rest = uri.utf8.dropFirst(path.utf8.count)
        return rest.isEmpty || rest.first == UInt8(ascii: "?")
    }

    /// The signing key with the `keyid` it signs under.
    struct Signer: Sendable {
        let key: Ed25519SigningKey
        let keyID: String
    }

    /// The document for one public base URL.
    final class Variant: Sendable {
        static let label = "locator"
        static let components: [ComponentIdentifier] = [
            ComponentIdentifier("@status"), .field("content-type"), .field("content-digest"),
        ]

        let body: ByteBuffer
        /// A strong validator over the body (its SHA-256, shortened): unchanged bytes, unchanged tag.
        let etag: String
        let contentDigest: String
        let maxAge: Int64
        let grace: Int64
        /// The signature's `tag`: the environment the document is for (``LocatorTag``).
        let tag: String
        private let signer: Signer?
        /// The current signature and when it was made.
        private let signed = NIOLockedValueBox<Signed?>(nil)

        struct Signed {
            let created: Int64
            let signatureInput: String
            let signature: String
        }

        init(body bytes: [UInt8], signer: Signer?, maxAge: Int64, grace: Int64, tag: String) {
            self.tag = tag
            body = ByteBuffer(bytes: bytes)
            let digest = bytes.withUnsafeBytes { OpenSSLDigest().digest(.sha256, of: $0) }
            etag = "\"" + Base64URL.encode(Array(digest.prefix(16))) + "\""
            contentDigest = bytes.withUnsafeBytes { ContentDigest.value(for: $0, algorithm: .sha256, using: OpenSSLDigest()) }
            self.signer = signer
            self.maxAge = maxAge
            self.grace = grace
            // Signed now, with the snapshot; again only once this signature's document is stale.
            if let signer {
                signed.withLockedValue {
                    $0 = Self.sign(
                        contentDigest: contentDigest, signer: signer, maxAge: maxAge, grace: grace, tag: tag,
                        now: RequestAuthenticator.now())
                }
            }
        }

        /// The signature fields over the document's `@status` (200), `content-type` and
        /// `content-digest`, valid from `now` to `now + maxAge + grace`, tagged with its environment.
        static func sign(contentDigest: String, signer: Signer, maxAge: Int64, grace: Int64, tag: String, now: Int64) -> Signed? {
            let input = SignatureInput(
                components: components, created: now, expires: now + maxAge + grace, keyID: signer.keyID, tag: tag)
            let fields = ["content-type": "application/json", "content-digest": contentDigest]
            guard let base = try? SignatureBase.make(forResponseStatus: 200, fields: fields, input: input) else { return nil }
            let signature = signer.key.sign(Array(base.utf8))
            guard signature.count == 64, let serialized = try? SignatureFields.serialize(label: label, input: input, signature: signature)
            else { return nil }
            return Signed(created: now, signatureInput: serialized.signatureInput, signature: serialized.signature)
        }

        /// The current signature, made again if the one held is past its document's freshness.
        private func currentSignature(now: Int64) -> Signed? {
            guard let signer else { return nil }
            return signed.withLockedValue { held in
                if let current = held, now < current.created + maxAge, now >= current.created { return current }
                held = Self.sign(contentDigest: contentDigest, signer: signer, maxAge: maxAge, grace: grace, tag: tag, now: now) ?? held
                return held
            }
        }

        func response(ifNoneMatch: [Substring], head: Bool, now: Int64) -> BuiltInResponse {
            var headers = HTTPHeaders()
            let signature = currentSignature(now: now)
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Cache-Control", value: "public, max-age=\(maxAge)")
            headers.add(name: "ETag", value: etag)
            headers.add(name: "Content-Digest", value: contentDigest)
            if let signature {
                headers.add(name: "Age", value: String(max(0, now - signature.created)))
                headers.add(name: "Signature-Input", value: signature.signatureInput)
                headers.add(name: "Signature", value: signature.signature)
            }
            if EntityTag.noneMatchNames(ifNoneMatch, etag: etag) {
                return BuiltInResponse(status: .notModified, headers: headers, body: nil, contentLength: nil)
            }
            return BuiltInResponse(status: .ok, headers: headers, body: head ? nil : body, contentLength: body.readableBytes)
        }

    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
