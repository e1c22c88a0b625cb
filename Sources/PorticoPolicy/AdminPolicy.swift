/// The admin listener: health, readiness, metrics, policy reload and inspection.
///
/// It is a listener of its own, never one of the public ones, so that an operator's firewall can
/// keep it on the inside. On loopback it needs no credentials (whoever can reach it already runs on
/// the machine); bound anywhere else it requires a bearer token, read from `tokenFile`.
public struct AdminPolicy: Sendable, Hashable {
    /// `127.0.0.1` unless the file says otherwise.
    public var address: String = "127.0.0.1"
    /// `0` asks the system for an ephemeral port (tests use it).
    public var port: Int
    /// The bearer token every admin request must present (`Authorization: Bearer <token>`); required
    /// when ``address`` is not a loopback address. Re-read on every reload, so it can be rotated.
    public var token: Secret?

    public init(address: String = "127.0.0.1", port: Int, token: Secret? = nil) {
        self.address = address
        self.port = port
        self.token = token
    }

    /// Whether `address` only accepts connections from this machine.
    public static func isLoopback(_ address: String) -> Bool {
        address == "::1" || address == "localhost" || address.hasPrefix("127.")
    }
}
