import NIOCore
import PorticoPolicy

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
        guard let address else { return nil }
        guard case .v6 = address, let text = address.ipAddress else { return address.ipAddress }
        var bytes = [UInt8](repeating: 0, count: 16)
        guard inet_pton(AF_INET6, text, &bytes) == 1 else { return text }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return "\(bytes[12]).\(bytes[13]).\(bytes[14]).\(bytes[15])"
        }
        var groups: [String] = []
        for index in stride(from: 0, to: 8, by: 2) {
            groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
        }
        return groups.joined(separator: ":") + "::/64"
    }
}
