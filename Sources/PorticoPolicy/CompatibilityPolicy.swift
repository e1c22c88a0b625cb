import Version

/// Where clients say who they are: the request fields the active version map reads.
///
/// Top-level `clients` section. The names are compared case-insensitively, as HTTP field names are.
public struct ClientsPolicy: Sendable, Hashable {
    /// The app's version, e.g. `2.4.1`, `2.4`, `2.4.1-beta.2`.
    public var versionHeader: String = "X-Client-Version"
    /// The app's platform, e.g. `iphone`, `ipad`, `android`, `web` (compared in lowercase).
    public var platformHeader: String = "X-Client-Platform"
}

/// One compatibility bucket of a service: app versions in `clients` (on `platforms`, or on any
/// platform when empty) get API `version`.
///
/// A platform's own buckets take precedence over the buckets for every platform, so that
/// `ipad >=2.5.0 → 3` can carve iPad apps out of `>=2.0.0 <3.1.0 → 2`. Within each of those sets
/// buckets must not overlap (the loader refuses a policy where they do).
public struct CompatibilityBucket: Sendable, Hashable {
    public var clients: VersionRange
    /// Lowercased; empty means every platform.
    public var platforms: [String]
    public var version: Int

    public init(clients: VersionRange, platforms: [String] = [], version: Int) {
        self.clients = clients
        self.platforms = platforms
        self.version = version
    }
}

/// What a service does with a request that carries no client version.
public enum MissingClientVersion: String, Sendable, Hashable, CaseIterable {
    /// Serve the service's default version.
    case `default`
    /// Answer 400, naming the header.
    case reject
}
