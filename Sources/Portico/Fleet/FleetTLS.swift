import PorticoPolicy
import PorticoTLS

/// Turns the `cluster` section's `rediss://` and `caFile` into an OpenSSL client context, and
/// OpenSSL's objections into a policy diagnostic naming the file and key path.
public enum FleetTLS {
    /// The client context for `cluster`, or `nil` for `redis://`.
    public static func context(for cluster: ClusterPolicy) throws(PolicyError) -> TLSClientContext? {
        guard cluster.redis.tls else { return nil }
        do {
            return try TLSClientContext(caFile: cluster.caFile?.path)
        } catch {
            let diagnostic =
                cluster.caFile?.origin.diagnostic("the CA file \(error.description)")
                ?? PolicyDiagnostic(file: "", line: nil, keyPath: "cluster.redis", message: error.description)
            throw PolicyError(diagnostics: [diagnostic])
        }
    }
}
