import Atomics
import PorticoPolicy

/// A policy snapshot compiled into what requests read: everything a stage needs, already
/// resolved, so that the request path does no lookup by name, no parsing and no string building
/// that the policy alone determines.
///
/// - the routes (``PolicySnapshot/routes``, a trie);
/// - the client keys as HMAC contexts (``Credentials``) and the signature coverage required
///   (``SignatureRequirements``);
/// - the API-key header's name in the lowercase form the forwarding filter compares with.
///
/// Immutable once built. ``PolicyStore`` builds one per snapshot, off the request path, and swaps
/// it in atomically; a request loads it once at its head and keeps it to the end.
public final class CompiledPolicy: Sendable {
    public let snapshot: PolicySnapshot
    let credentials: Credentials
    let signatureRequirements: SignatureRequirements
    /// `apiKeys.header`, lowercased: the field not forwarded upstream, since it holds the secret.
    let apiKeyHeader: String

    public init(_ snapshot: PolicySnapshot) {
        let policy = snapshot.policy
        self.snapshot = snapshot
        credentials = Credentials(policy: policy)
        signatureRequirements = SignatureRequirements(policy.signatures)
        apiKeyHeader = policy.apiKeys.header.lowercased()
    }
}

/// Lets ``PolicyStore`` hold the current policy in a `ManagedAtomic`: a strong reference that
/// readers load and a reload replaces concurrently, with no lock and no reader ever seeing a
/// released object.
extension CompiledPolicy: AtomicReference {}
