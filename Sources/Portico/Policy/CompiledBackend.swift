import PorticoPolicy
import PorticoUpstream

/// A backend as the proxy handler uses it, everything a forwarded request needs already derived
/// from its policy: the origin, the `Host` value, the URL prefix, the timeouts, the client, its
/// rate limit.
///
/// One per backend per compiled policy, shared by every request to it; a request's upstream URL
/// is then this prefix plus its own path and query, one string built per request.
final class CompiledBackend: Sendable {
    let name: String
    /// `scheme://host:port`, the port always written, as every upstream URL has carried it.
    let origin: String
    /// The base path: empty, or starting with `/` and without a trailing one.
    let basePath: String
    /// ``origin`` followed by ``basePath``: what every upstream URL to this backend starts with.
    let urlPrefix: String
    /// The `Host` field sent upstream (RFC 9110 §7.2): the host, with `:port` only when it is not
    /// the scheme's default.
    let hostHeader: String
    let connectTimeout: Duration
    let timeout: Duration
    /// The upstream client the policy names; `nil` lets the routing client go by the scheme.
    let client: UpstreamClientKind?
    /// Requests in flight at once; `nil` is no cap.
    let maxConcurrent: Int?
    let rateLimit: CompiledRateLimit?

    init(_ policy: BackendPolicy) {
        let url = policy.url
        name = policy.name
        origin = "\(url.scheme)://\(url.hostForURL):\(url.port)"
        basePath = url.basePath
        urlPrefix = origin + url.basePath
        let defaultPort = url.scheme == "https" ? 443 : 80
        hostHeader = url.port == defaultPort ? url.hostForURL : "\(url.hostForURL):\(url.port)"
        connectTimeout = policy.connectTimeout
        timeout = policy.timeout
        client = policy.client.map(UpstreamClientKind.init)
        maxConcurrent = policy.maxConcurrent
        rateLimit = policy.rateLimit.map { CompiledRateLimit(kind: .backend, name: policy.name, policy: $0) }
    }
}
