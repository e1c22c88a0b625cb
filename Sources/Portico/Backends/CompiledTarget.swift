import PorticoPolicy

/// One target of a backend as requests use it: its URL prefix and `Host` value compiled once, and
/// its state (``TargetState``), which outlives the policy.
final class CompiledTarget: Sendable {
    /// Its place among the backend's targets (a bit in a request's set of tried targets).
    let index: Int
    /// `scheme://host:port`, the port always written.
    let origin: String
    /// ``origin`` followed by the backend's base path: what every upstream URL to it starts with.
    let urlPrefix: String
    /// The `Host` field sent to it (RFC 9110 §7.2): the host, with `:port` only when it is not the
    /// scheme's default.
    let hostHeader: String
    /// The host as the policy names it (no port, no brackets): what a TLS connection to it sends as
    /// SNI and requires of its certificate, when ``origin`` holds the address it resolved to.
    let serverName: String
    let weight: Int
    let state: TargetState

    /// - Parameter address: where to connect, as a URL writes it (an IP literal the host name
    ///   resolved to, bracketed for IPv6); the `Host` field keeps the name.
    init(_ target: BackendTarget, index: Int, address: String? = nil, state: TargetState) {
        let url = target.url
        self.index = index
        origin = "\(url.scheme)://\(address ?? url.hostForURL):\(url.port)"
        urlPrefix = origin + url.basePath
        let defaultPort = url.scheme == "https" ? 443 : 80
        hostHeader = url.port == defaultPort ? url.hostForURL : "\(url.hostForURL):\(url.port)"
        serverName = url.host
        weight = target.weight
        self.state = state
    }
}

/// A set of a backend's targets by index (at most 64), such as those a request has tried.
struct TargetSet: Equatable {
    private(set) var bits: UInt64 = 0

    static let empty = TargetSet()

    func contains(_ index: Int) -> Bool { bits & (1 << UInt64(index)) != 0 }
    mutating func insert(_ index: Int) { bits |= 1 << UInt64(index) }
}
