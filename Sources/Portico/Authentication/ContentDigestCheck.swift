import NIOCore
import PorticoCrypto
import PorticoPolicy
import PorticoSigning

/// The check a signed request's body passes once it has arrived whole, before any handler sees it:
/// it matches the `Content-Digest` the signature covered (RFC 9530), else 400.
enum ContentDigestCheck {
    static func problem(for exchange: Exchange) -> Problem? {
        guard let digest = exchange.contentDigest else { return nil }
        let matches = { (bytes: UnsafeRawBufferPointer) in (try? ContentDigest.verify(digest, body: bytes, using: OpenSSLDigest())) == true
        }
        let body = exchange.body
        let verified = body.map { $0.withUnsafeReadableBytes(matches) } ?? matches(UnsafeRawBufferPointer(start: nil, count: 0))
        return verified ? nil : .contentDigestMismatch()
    }
}
