import PorticoPolicy

/// The client keys of one policy snapshot, ready for verification: every secret already absorbed
/// into an OpenSSL HMAC context, so a request pays for its MAC and nothing else.
///
/// Built when a snapshot is installed and replaced with it, so a revoked or rotated key takes
/// effect on the next load.
final class Credentials: Sendable {
    struct Credential: Sendable {
        let policy: ClientKeyPolicy
        let current: OpenSSLHMACKey
        /// HMAC of the current secret under ``Credentials/fingerprintKey``: what a presented
        /// `X-API-Key` secret is compared with, at a fixed length and in constant time.
        let fingerprint: [UInt8]
        /// The secret being rotated out, accepted until `expires` (seconds since 1970).
        let previous: (key: OpenSSLHMACKey, fingerprint: [UInt8], expires: Int64)?
        /// The most live nonces this key may hold in the replay store (``Policy/nonceQuota(for:)``).
        let nonceQuota: Int
    }

    let byID: [String: Credential]
    /// Stands in for an unknown key id, so that an unknown key and a wrong secret cost the same and
    /// get the same answer.
    let decoy: OpenSSLHMACKey
    let decoyFingerprint: [UInt8]

    /// A per-process random key for fingerprints; it never leaves memory.
    static let fingerprintKey = OpenSSLHMACKey(key: randomBytes())!

    init(policy snapshotPolicy: Policy) {
        var byID: [String: Credential] = [:]
        for (id, policy) in snapshotPolicy.keys {
            // OpenSSL without HMAC-SHA256 cannot run the gateway at all; the decoy below traps too.
            let current = OpenSSLHMACKey(key: policy.secret.bytes)!
            var previous: (OpenSSLHMACKey, [UInt8], Int64)?
            if let secret = policy.previousSecret, let expires = policy.previousSecretExpires {
                previous = (OpenSSLHMACKey(key: secret.bytes)!, Self.fingerprint(secret.bytes), expires)
            }
            byID[id] = Credential(
                policy: policy, current: current, fingerprint: Self.fingerprint(policy.secret.bytes), previous: previous,
                nonceQuota: snapshotPolicy.nonceQuota(for: policy))
        }
        self.byID = byID
        let decoyBytes = Self.randomBytes()
        decoy = OpenSSLHMACKey(key: decoyBytes)!
        decoyFingerprint = Self.fingerprint(decoyBytes)
    }

    /// 32 bytes from the system's CSPRNG.
    private static func randomBytes() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    static func fingerprint(_ secret: [UInt8]) -> [UInt8] {
        secret.withUnsafeBytes { fingerprintKey.authenticationCode(for: $0) }
    }
}
