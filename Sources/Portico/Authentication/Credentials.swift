import PorticoCrypto
import PorticoPolicy
import PorticoSigning

/// The client keys of one policy snapshot, ready for verification: every secret already absorbed
/// into an HMAC key (``OpenSSLHMACKey``), so a request pays for its MACs and nothing else.
///
/// Each key has two authenticators, its current secret and a second one (the secret being
/// rotated out, or a random stand-in), and an unknown key id has two stand-ins: a verification
/// always computes exactly two MACs, whatever the key (see ``MessageSignature/verify(_:request:candidates:_:)``).
///
/// Built when a snapshot is installed and replaced with it, so a revoked or rotated key takes
/// effect on the next load.
final class Credentials: Sendable {
    /// A class, so that a lookup hands out one reference instead of copying the key's policy and
    /// authenticators field by field (a profile of the signed route put those copies at 0.7 %).
    final class Credential: Sendable {
        let policy: ClientKeyPolicy
        let current: any MessageAuthenticator
        /// HMAC of the current secret under ``Credentials/fingerprintKey``: what a presented
        /// `X-API-Key` secret is compared with, at a fixed length and in constant time.
        let fingerprint: [UInt8]
        /// The secret being rotated out, accepted until `expires` (seconds since 1970).
        let previous: (key: any MessageAuthenticator, fingerprint: [UInt8], expires: Int64)?
        /// The most live nonces this key may hold in the replay store (``Policy/nonceQuota(for:)``).
        let nonceQuota: Int
        /// What every request by this key reads, taken out of ``policy`` once: reading them there
        /// copied the whole key policy (a reference count per field) on each request.
        let id: String
        let tier: String?
        let isRevoked: Bool
        /// The services the key may call; nil for every service (`"*"`).
        let services: [String]?
        /// SigV4 signing keys of the current secret and of the one being rotated out, for a key
        /// with an `accessKeyId`.
        let sigv4: (current: SigV4SigningKeys, previous: SigV4SigningKeys?)?

        init(
            policy: ClientKeyPolicy, current: any MessageAuthenticator, fingerprint: [UInt8],
            previous: (key: any MessageAuthenticator, fingerprint: [UInt8], expires: Int64)?, nonceQuota: Int
        ) {
            self.policy = policy
            self.current = current
            self.fingerprint = fingerprint
            self.previous = previous
            self.nonceQuota = nonceQuota
            id = policy.id
            tier = policy.tier
            isRevoked = policy.status == .revoked
            services = policy.services.contains("*") ? nil : policy.services
            sigv4 = policy.accessKeyID.map { _ in
                (SigV4SigningKeys(secret: policy.secret.bytes), policy.previousSecret.map { SigV4SigningKeys(secret: $0.bytes) })
            }
        }

        func mayCall(service: String) -> Bool {
            services?.contains(service) ?? true
        }
    }

    let byID: [String: Credential]
    /// The keys that sign SigV4 requests, by access key id.
    let byAccessKeyID: [String: Credential]
    /// Stand-ins for an unknown access key id (and for a key without a previous secret), so that
    /// every SigV4 verification computes two MACs with derived keys, whatever the id.
    let sigv4Decoy: SigV4SigningKeys
    let sigv4SecondDecoy: SigV4SigningKeys
    /// Stands in for an unknown key id, so that an unknown key and a wrong secret cost the same and
    /// get the same answer.
    let decoy: any MessageAuthenticator
    let decoyFingerprint: [UInt8]
    /// Stands in for the previous secret of a key that has none (or of an unknown key id).
    let secondDecoy: any MessageAuthenticator
    let secondDecoyFingerprint: [UInt8]

    /// A per-process random key for fingerprints; it never leaves memory.
    static let fingerprintKey = OpenSSLHMACKey(key: randomBytes())!

    /// - Parameter makeKey: the authenticator of a secret (tests count MACs through it).
    init(policy snapshotPolicy: Policy, makeKey: ([UInt8]) -> any MessageAuthenticator = Credentials.openSSLKey) {
        var byID: [String: Credential] = [:]
        for (id, policy) in snapshotPolicy.keys {
            let current = makeKey(policy.secret.bytes)
            var previous: (any MessageAuthenticator, [UInt8], Int64)?
            if let secret = policy.previousSecret, let expires = policy.previousSecretExpires {
                previous = (makeKey(secret.bytes), Self.fingerprint(secret.bytes), expires)
            }
            byID[id] = Credential(
                policy: policy, current: current, fingerprint: Self.fingerprint(policy.secret.bytes), previous: previous,
                nonceQuota: snapshotPolicy.nonceQuota(for: policy))
        }
        self.byID = byID
        var byAccessKeyID: [String: Credential] = [:]
        for credential in byID.values {
            if let accessKeyID = credential.policy.accessKeyID { byAccessKeyID[accessKeyID] = credential }
        }
        self.byAccessKeyID = byAccessKeyID
        sigv4Decoy = SigV4SigningKeys(secret: Self.randomBytes())
        sigv4SecondDecoy = SigV4SigningKeys(secret: Self.randomBytes())
        let decoyBytes = Self.randomBytes()
        decoy = makeKey(decoyBytes)
        decoyFingerprint = Self.fingerprint(decoyBytes)
        let secondDecoyBytes = Self.randomBytes()
        secondDecoy = makeKey(secondDecoyBytes)
        secondDecoyFingerprint = Self.fingerprint(secondDecoyBytes)
    }

    /// The two authenticators a signature by `keyID` is checked with, and whether a match with the
    /// second counts (it is a previous secret still in its window). Decoys fill in for what the key
    /// lacks, so every key id costs the same.
    func candidates(
        for keyID: String, now: Int64
    ) -> (
        credential: Credential?, first: any MessageAuthenticator, second: any MessageAuthenticator, secondCounts: Bool
    ) {
        let credential = byID[keyID]
        let previous = credential?.previous
        return (credential, credential?.current ?? decoy, previous?.key ?? secondDecoy, previous.map { now < $0.expires } ?? false)
    }

    /// OpenSSL without SHA-256 cannot run the gateway at all, so a key that cannot be made traps.
    static func openSSLKey(_ secret: [UInt8]) -> any MessageAuthenticator {
        OpenSSLHMACKey(key: secret)!
    }

    /// 32 bytes from the system's CSPRNG.
    private static func randomBytes() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    static func fingerprint(_ secret: [UInt8]) -> [UInt8] {
        secret.withUnsafeBytes { fingerprintKey.authenticationCode(for: $0) }
    }

    static func fingerprint(_ secret: Substring) -> [UInt8] {
        var secret = secret
        return secret.withUTF8 { fingerprintKey.authenticationCode(for: UnsafeRawBufferPointer($0)) }
    }
}
