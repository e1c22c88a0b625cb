import Crypto
import Foundation
import PorticoSigning

/// The public key an app pins to trust the service locator wherever it was fetched from (the
/// gateway, a CDN, a proxy): `portico locator-key` prints it.
///
/// With a pinned key, ``ServiceLocatorClient`` accepts a document only with the gateway's
/// RFC 9421 response signature (`ed25519`) over `@status`, `content-type` and `content-digest`,
/// with `created` and `expires`, and a `Content-Digest` (RFC 9530, `sha-256`) that matches the
/// exact bytes received. An unsigned, altered, expired or otherwise-signed document is refused and
/// the last good one kept.
public struct PinnedLocatorKey: Sendable {
    let key: Curve25519.Signing.PublicKey
    /// When set, the signature's `keyid` must be this.
    public var keyID: String?
    /// When set, the environment the app belongs to (`production`): the signature must be tagged
    /// for it (``LocatorTag``) and the document must say it. Every environment's document is signed
    /// with the same key, so this is what stops staging's document reaching production's apps.
    public var environment: String?
    /// How far the device clock may be off: a signature created up to this far in the future, or
    /// expired up to this long ago, is still accepted.
    public var allowedClockSkew: TimeInterval = 60

    /// - Parameter base64URL: the raw 32-byte Ed25519 public key in base64url, as `portico
    ///   locator-key` prints it (padding optional).
    public init(base64URL: String, keyID: String? = nil) throws {
        var text = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text) else {
            throw ServiceLocatorError.invalidKey("not base64url (portico locator-key prints the key to pin)")
        }
        try self.init(rawRepresentation: data, keyID: keyID)
    }

    /// Throws ``ServiceLocatorError/invalidKey`` unless the bytes are a 32-byte Ed25519 public key.
    public init(rawRepresentation: some ContiguousBytes, keyID: String? = nil) throws {
        let count = rawRepresentation.withUnsafeBytes(\.count)
        do {
            key = try Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation)
        } catch {
            throw ServiceLocatorError.invalidKey("\(count) bytes, not a 32-byte Ed25519 public key")
        }
        self.keyID = keyID
    }
}

/// Checks a locator response's signature against a pinned key.
enum LocatorSignatureVerifier {
    static let requiredComponents = ["@status", "content-type", "content-digest"]

    /// Throws ``ServiceLocatorError/invalidSignature`` saying what is wrong.
    ///
    /// - Parameters:
    ///   - status: the status of the representation (200; a 304 revalidates the stored 200).
    ///   - headers: the fields that came with it (a 304's, for a revalidation).
    ///   - body: the representation's exact bytes.
    /// - Returns: when the signature stops being acceptable (its `expires` plus the allowed clock
    ///   skew): a cached copy must not be used past it, whatever the unsigned `Cache-Control` says.
    @discardableResult
    static func verify(
        status: Int, headers: ServiceLocatorResponse, body: Data, key pinned: PinnedLocatorKey, now: Date
    ) throws(ServiceLocatorError) -> Date {
        guard let inputField = headers.header("signature-input"), let signatureField = headers.header("signature") else {
            throw .invalidSignature("the document is not signed (no Signature-Input and Signature)")
        }
        let signature: SignatureFields.Signature
        do {
            signature = try SignatureFields.select(label: nil, signatureInput: inputField, signature: signatureField)
        } catch {
            throw .invalidSignature("\(error)")
        }
        let input = signature.input
        let covered = input.components.map(\.description)
        for component in requiredComponents where !covered.contains("\"\(component)\"") {
            throw .invalidSignature("the signature does not cover \(component)")
        }
        guard let created = input.created, let expires = input.expires else {
            throw .invalidSignature("the signature has no created or expires parameter")
        }
        if let wanted = pinned.keyID, input.keyID != wanted {
            throw .invalidSignature("the signature's keyid is \(input.keyID ?? "missing"), not the pinned \(wanted)")
        }
        if let environment = pinned.environment, input.tag != LocatorTag.value(environment: environment) {
            throw .invalidSignature(
                "the document is signed for \(input.tag.map { "\"\($0)\"" } ?? "no environment"), not the pinned environment \(environment)"
            )
        }
        guard let digestField = headers.header("content-digest"), let contentType = headers.header("content-type") else {
            throw .invalidSignature("Content-Digest or Content-Type is missing")
        }
        let matches: Bool
        do {
            matches = try body.withUnsafeBytes { bytes throws(SigningError) in
                try ContentDigest.verify(digestField, body: bytes, using: CryptoDigestFunction())
            }
        } catch {
            throw .invalidSignature("Content-Digest: \(error)")
        }
        guard matches else { throw .invalidSignature("the body does not match its Content-Digest") }
        let base: String
        do {
            base = try SignatureBase.make(
                forResponseStatus: status, fields: ["content-type": contentType, "content-digest": digestField], input: input)
        } catch {
            throw .invalidSignature("\(error)")
        }
        guard pinned.key.isValidSignature(signature.value, for: Data(base.utf8)) else {
            throw .invalidSignature("the signature does not verify with the pinned key")
        }
        // Times are judged once the signature is known to be the gateway's: then a `created` ahead
        // of this device is the gateway's own time, which a client whose clock is behind may trust.
        let seconds = now.timeIntervalSince1970
        guard TimeInterval(expires) + pinned.allowedClockSkew >= seconds else {
            throw .invalidSignature("the signature expired at \(expires) (now \(Int64(seconds)))")
        }
        guard TimeInterval(created) - pinned.allowedClockSkew <= seconds else {
            throw .createdInTheFuture(created: created, now: Int64(seconds))
        }
        return Date(timeIntervalSince1970: TimeInterval(expires) + pinned.allowedClockSkew)
    }
}
