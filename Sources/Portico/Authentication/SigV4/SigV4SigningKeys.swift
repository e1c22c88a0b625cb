import NIOConcurrencyHelpers
import PorticoCrypto

/// One secret's SigV4 signing keys, derived once per day, region and service and kept:
/// `kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request")`.
/// A request then costs one HMAC with the derived key instead of five.
///
/// Few scopes are live at once (today's, around midnight yesterday's), so the cache is small and
/// emptied whole when it fills; a flood of made-up scopes costs the derivations and no memory.
final class SigV4SigningKeys: Sendable {
    private let root: OpenSSLHMACKey
    private let cache = NIOLockedValueBox<[String: OpenSSLHMACKey]>([:])

    static let maxScopes = 16

    init(secret: [UInt8]) {
        root = OpenSSLHMACKey(key: Array("AWS4".utf8) + secret)!
    }

    func key(date: String, region: String, service: String) -> OpenSSLHMACKey {
        let scope = "\(date)/\(region)/\(service)"
        if let known = cache.withLockedValue({ $0[scope] }) { return known }
        let dateKey = Self.mac(root, date)
        let regionKey = Self.mac(OpenSSLHMACKey(key: dateKey)!, region)
        let serviceKey = Self.mac(OpenSSLHMACKey(key: regionKey)!, service)
        let signingKey = OpenSSLHMACKey(key: Self.mac(OpenSSLHMACKey(key: serviceKey)!, "aws4_request"))!
        cache.withLockedValue { cache in
            if cache.count >= Self.maxScopes { cache.removeAll() }
            cache[scope] = signingKey
        }
        return signingKey
    }

    static func mac(_ key: OpenSSLHMACKey, _ text: String) -> [UInt8] {
        Array(text.utf8).withUnsafeBytes { key.authenticationCode(for: $0) }
    }
}
