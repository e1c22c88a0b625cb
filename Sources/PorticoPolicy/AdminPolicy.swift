#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
    /// Which peer addresses may reach the admin listener at all (`allowFrom`, `denyFrom`).
    public var addresses = AddressList()

    public init(address: String = "127.0.0.1", port: Int, token: Secret? = nil) {
        self.address = address
        self.port = port
        self.token = token
    }

    /// Whether `address` names this machine only: an IP literal in a loopback range (`127.0.0.0/8`,
    /// `::1`, or `::ffff:127.0.0.0/104`, the IPv4 range as a dual-stack socket shows it), or exactly
    /// `localhost` (given in lowercase).
    ///
    /// Only literals are read: a host *name* that merely starts like one
    /// (`127.0.0.1.rebind.attacker.example`) resolves wherever its owner likes, which is how a
    /// DNS-rebinding page reaches a loopback listener while naming its own host.
    public static func isLoopback(_ address: String) -> Bool {
        if address == "localhost" { return true }
        var v4 = in_addr()
        // glibc's inet_pton takes the four-part dotted quad alone (no "127.1", no octal or hex).
        if inet_pton(AF_INET, address, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { $0[0] == 127 }
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, address, &v6) == 1 else { return false }
        return withUnsafeBytes(of: &v6) { bytes in
            let isLoopback = bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
            let isMappedLoopback = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
            return isLoopback || isMappedLoopback
        }
    }
}
