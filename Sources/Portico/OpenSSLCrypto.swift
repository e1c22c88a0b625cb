import CPorticoOpenSSL
import PorticoSigning

/// HMAC-SHA256 under one key, computed by the system OpenSSL.
///
/// The key is absorbed once, into a context that each MAC duplicates, so a verification costs a
/// copy and two hash compressions over the key pads rather than a fresh key set-up.
public final class OpenSSLHMACKey: MessageAuthenticator, @unchecked Sendable {
    // Unchecked: the context is written only by `init` and read (duplicated) afterwards, which
    // OpenSSL allows from several threads at once.
    private let context: OpaquePointer

    /// Fails only when OpenSSL cannot provide HMAC-SHA256 at all (a broken installation).
    public init?(key: [UInt8]) {
        guard let context = key.withUnsafeBytes({ portico_hmac_sha256_new($0.baseAddress, $0.count) }) else { return nil }
        self.context = context
    }

    deinit {
        EVP_MAC_CTX_free(context)
    }

    public func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            count = portico_hmac_sha256(context, message.baseAddress, message.count, buffer.baseAddress) == 1 ? 32 : 0
        }
    }
}

/// SHA-256 and SHA-512 by the system OpenSSL, for `Content-Digest`.
public struct OpenSSLDigest: DigestFunction {
    public init() {}

    public func digest(_ algorithm: DigestAlgorithm, of bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let (bits, length): (Int32, Int) =
            switch algorithm {
            case .sha256: (256, 32)
            case .sha512: (512, 64)
            }
        return [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            count = portico_sha(bits, bytes.baseAddress, bytes.count, buffer.baseAddress) == 1 ? length : 0
        }
    }
}
