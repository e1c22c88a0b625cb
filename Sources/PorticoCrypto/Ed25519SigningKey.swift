import CPorticoOpenSSL
import Foundation

/// An Ed25519 private key held by the system OpenSSL: what the gateway signs its service locator
/// with.
///
/// Why OpenSSL and not swift-crypto, which the client library verifies with: the key arrives as a
/// PEM (PKCS#8) file, the form `openssl genpkey -algorithm ed25519` and `portico keygen --ed25519`
/// write, and OpenSSL reads that form itself, where swift-crypto's `Curve25519` takes raw bytes
/// only; and the gateway already does all its cryptography through OpenSSL, so the server gains no
/// second crypto library. The signature is plain RFC 8032 Ed25519 either way, which the client's
/// swift-crypto and Python's `cryptography` verify (see `LocatorSignatureTests`).
public final class Ed25519SigningKey: @unchecked Sendable {
    // Unchecked: the key is written only by `init` and only read afterwards; OpenSSL allows
    // concurrent use of an EVP_PKEY for signing, each with its own EVP_MD_CTX.
    private let key: OpaquePointer
    /// The raw 32-byte public key (RFC 8032 §5.1.5).
    public let publicKey: [UInt8]

    public struct KeyError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Reads a PEM private key; it must be an unencrypted Ed25519 one.
    public init(pem: String) throws(KeyError) {
        let loaded: OpaquePointer? = pem.utf8CString.withUnsafeBufferPointer { text in
            guard let bio = BIO_new_mem_buf(text.baseAddress, Int32(text.count - 1)) else { return nil }
            defer { BIO_free(bio) }
            // A passphrase-protected key is refused, never prompted for on a terminal (which would
            // block a reload): the callback supplies no passphrase.
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        ERR_clear_error()
        guard let loaded else { throw KeyError(description: "not a PEM private key (expected -----BEGIN PRIVATE KEY-----)") }
        guard EVP_PKEY_get_base_id(loaded) == EVP_PKEY_ED25519 else {
            EVP_PKEY_free(loaded)
            throw KeyError(description: "not an Ed25519 key (make one with portico keygen --ed25519)")
        }
        var length = 32
        var raw = [UInt8](repeating: 0, count: 32)
        guard EVP_PKEY_get_raw_public_key(loaded, &raw, &length) == 1, length == 32 else {
            EVP_PKEY_free(loaded)
            throw KeyError(description: "OpenSSL could not derive the public key")
        }
        key = loaded
        publicKey = raw
    }

    /// Reads the PEM file at `path`.
    public convenience init(file path: String) throws(KeyError) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw KeyError(description: "cannot read \(path)")
        }
        try self.init(pem: text)
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// A new random key, as PEM (PKCS#8): what `portico keygen --ed25519` prints.
    public static func generatePEM() -> String? {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var generated: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_keygen(context, &generated) == 1, let generated else { return nil }
        defer { EVP_PKEY_free(generated) }
        return pem { bio in PEM_write_bio_PrivateKey(bio, generated, nil, nil, 0, nil, nil) }
    }

    /// The public key as PEM (SubjectPublicKeyInfo): what `portico locator-key` prints.
    public var publicKeyPEM: String? {
        Self.pem { bio in PEM_write_bio_PUBKEY(bio, key) }
    }

    /// The Ed25519 signature of `message` (64 bytes); empty only if OpenSSL fails.
    public func sign(_ message: [UInt8]) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { return [] }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1 else { return [] }
        var length = 64
        var signature = [UInt8](repeating: 0, count: 64)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else { return [] }
        return Array(signature.prefix(length))
    }

    /// What `write` puts into a memory BIO, as text.
    private static func pem(_ write: (OpaquePointer) -> Int32) -> String? {
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { return nil }
        var pointer: UnsafeMutablePointer<CChar>?
        let count = withUnsafeMutablePointer(to: &pointer) { BIO_ctrl(bio, BIO_CTRL_INFO, 0, UnsafeMutableRawPointer($0)) }
        guard count > 0, let pointer else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self)
    }
}
