import NIOCore
import PorticoCrypto
import PorticoSigning

/// The check a SigV4 request's body passes once it has arrived whole, before any handler sees it:
/// its SHA-256 is the one `x-amz-content-sha256` stated (and the signature covered), else 400.
enum PayloadHashCheck {
    static func problem(for exchange: Exchange) -> Problem? {
        guard let expected = exchange.payloadSHA256 else { return nil }
        let digest = OpenSSLDigest()
        let actual =
            exchange.body.map { $0.withUnsafeReadableBytes { digest.digest(.sha256, of: $0) } }
            ?? digest.digest(.sha256, of: UnsafeRawBufferPointer(start: nil, count: 0))
        return ConstantTime.equal(actual, expected) ? nil : .sigv4PayloadMismatch()
    }
}
