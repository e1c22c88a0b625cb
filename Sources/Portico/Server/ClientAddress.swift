import NIOCore
import PorticoPolicy

/// The subject of a client's per-address rate limit.
///
/// An IPv4 client is one address. An IPv6 client is its /64: one subscriber line or host is
/// allocated at least a /64 (RFC 6177), so keying single addresses would let a client rotate
/// through 2^64 of them and get a fresh bucket each time. An IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`, a dual-stack listener's view of an IPv4 client) is its IPv4 address.
enum ClientAddress {
    /// The same, from an address's bytes (4, or 16).
    static func rateLimitSubject(bytes: [UInt8]) -> String? {
        let bytes = AddressRange.unmapped(bytes)
        if bytes.count == 4 { return "\(bytes[0]).\(bytes[1]).\(bytes[2]).\(bytes[3])" }
        guard bytes.count == 16 else { return nil }
        var groups: [String] = []
        for index in stride(from: 0, to: 8, by: 2) {
            groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
        }
        return groups.joined(separator: ":") + "::/64"
    }

    /// The bytes of the peer's address (4, or 16).
    static func bytes(_ address: SocketAddress?) -> [UInt8]? {
        address?.ipAddress.flatMap(AddressRange.bytes(of:))
    }

    static func rateLimitSubject(_ address: SocketAddress?) -> String? {
        guard let text = address?.ipAddress else { return nil }
        return AddressRange.bytes(of: text).flatMap { rateLimitSubject(bytes: $0) } ?? text
    }
}
