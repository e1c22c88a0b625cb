import PorticoCrypto
import PorticoPolicy

/// The locator's signing key, read from the file `locator.signingKey` names, with OpenSSL's
/// objections turned into a policy diagnostic naming that key.
public enum LocatorSigning {
    /// The key of `snapshot`'s locator; `nil` when it has no locator or no key.
    public static func key(for snapshot: PolicySnapshot) throws(PolicyError) -> Ed25519SigningKey? {
        guard let file = snapshot.policy.locator?.signingKey else { return nil }
        do {
            return try Ed25519SigningKey(file: file.path)
        } catch {
            throw PolicyError(diagnostics: [file.origin.diagnostic("\(file.path): \(error.description)")])
        }
    }

    /// The `keyid` signatures carry with `key` under `snapshot`'s policy.
    public static func keyID(for snapshot: PolicySnapshot, key: Ed25519SigningKey) -> String {
        snapshot.policy.locator?.keyID ?? CompiledLocator.defaultKeyID(for: key.publicKey)
    }

    /// base64url without padding (RFC 4648 §5): how the raw public key is printed, published and pinned.
    public static func base64URL(_ bytes: [UInt8]) -> String { Base64URL.encode(bytes) }
}
