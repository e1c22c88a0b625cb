import Crypto
import PorticoSigning

/// HMAC-SHA256 under one client secret, computed by swift-crypto.
///
/// swift-crypto is CryptoKit's API: on Apple platforms it is CryptoKit itself, elsewhere it carries
/// its own copy of BoringSSL. Either way the client library never needs the system OpenSSL, so an
/// app can add it without linking anything the platform does not already have.
public struct HMACSHA256Authenticator: MessageAuthenticator {
    private let key: SymmetricKey

    /// - Parameter key: the secret's bytes. For a Portico key these are the UTF-8 bytes of the text
    ///   `portico keygen` printed (the gateway does not base64-decode it).
    public init(key: some Sequence<UInt8>) {
        self.key = SymmetricKey(data: Array(key))
    }

    public func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: key))
    }
}

/// SHA-256 and SHA-512 by swift-crypto, for `Content-Digest` (RFC 9530).
public struct CryptoDigestFunction: DigestFunction {
    public init() {}

    public func digest(_ algorithm: DigestAlgorithm, of bytes: UnsafeRawBufferPointer) -> [UInt8] {
        switch algorithm {
        case .sha256: Array(SHA256.hash(data: bytes))
        case .sha512: Array(SHA512.hash(data: bytes))
        }
    }
}
