import CPorticoOpenSSL
import PorticoSigning

/// SHA-256 and SHA-512 by the system OpenSSL, for `Content-Digest`; SHA-1 for the one name that
/// needs it (Redis names a loaded script by its SHA-1).
public struct OpenSSLDigest: DigestFunction {
    public init() {}

    /// The SHA-1 of `bytes` (20 bytes); nil only if OpenSSL fails. Not for security: `EVALSHA`
    /// names a script by it.
    public static func sha1(of bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        guard EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, EVP_sha1(), nil) == 1, length == 20 else { return nil }
        return digest
    }

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
