/// Fleet mode: rate-limit buckets and signature nonces shared by every gateway of a fleet through
/// one Redis. Without a `cluster` section a gateway keeps them in its own memory, as always.
///
/// Backends' `maxConcurrent` stays per gateway either way.
public struct ClusterPolicy: Sendable, Hashable {
    public var redis: RedisAddress
    /// `AUTH` on connect, read from `passwordFile`.
    public var password: Secret?
    /// `SELECT` on connect.
    public var database: Int = 0
    /// Longest wait for Redis's reply (and for a connection) before `onFailure` applies.
    public var timeout: Duration = .milliseconds(50)
    public var onFailure = ClusterFailurePolicy()
    /// For `rediss://`: the PEM file of CA certificates Redis's certificate must chain to; `nil`
    /// trusts the system's CAs. Opened with OpenSSL when the gateway starts (and by `portico check`).
    public var caFile: PolicyFile?

    public init(redis: RedisAddress, password: Secret? = nil, database: Int = 0, timeout: Duration = .milliseconds(50)) {
        self.redis = redis
        self.password = password
        self.database = database
        self.timeout = timeout
    }
}

/// `redis://host:port`, or `rediss://host:port` for TLS.
public struct RedisAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// `rediss://`: TLS 1.2 or later, the server's certificate verified and required to name `host`.
    public var tls: Bool

    public init(host: String, port: Int, tls: Bool = false) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    public var description: String { "\(tls ? "rediss" : "redis")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// What a gateway does when Redis cannot answer in time (down, slow, or its breaker open).
public struct ClusterFailurePolicy: Sendable, Hashable {
    public enum Limits: String, Sendable, CaseIterable {
        /// Each gateway limits with its own in-process buckets: a fleet of N admits up to N times
        /// the limit meanwhile. The default.
        case local
        /// No rate limit applies meanwhile.
        case allow
        /// Requests that a limit applies to are refused (503 with `Retry-After`).
        case deny
    }

    public enum Nonces: String, Sendable, CaseIterable {
        /// Signed requests with a nonce are refused (503 with `Retry-After`): fail closed, the default.
        case deny
        /// Each gateway records nonces in its own store: a request could be replayed once at each
        /// other gateway meanwhile.
        case local
    }

    public var limits: Limits = .local
    public var nonces: Nonces = .deny

    public init(limits: Limits = .local, nonces: Nonces = .deny) {
        self.limits = limits
        self.nonces = nonces
    }
}
