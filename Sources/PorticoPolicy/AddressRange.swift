#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A block of IP addresses in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`), or one address (a
/// /32 or /128). An IPv4 client that a dual-stack listener sees as `::ffff:a.b.c.d` is matched as
/// its IPv4 address.
public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
    /// The network's bytes (4 or 16), the bits past the prefix cleared.
    public let network: [UInt8]
    public let prefix: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.bytes(of: String(parts[0])) else { return nil }
        let width = bytes.count * 8
        var prefix = width
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) }), parts[1].count <= 3,
                let value = Int(parts[1]), value <= width
            else { return nil }
            prefix = value
        }
        self.prefix = prefix
        network = Self.masked(bytes, prefix: prefix)
    }

    public var description: String {
        var text = [CChar](repeating: 0, count: 64)
        var bytes = network
        let family = network.count == 4 ? AF_INET : AF_INET6
        _ = inet_ntop(family, &bytes, &text, socklen_t(text.count))
        return String(cString: text) + "/\(prefix)"
    }

    /// Whether `address` (4 or 16 bytes; a v4-mapped v6 address counts as its IPv4 one) is in the block.
    public func contains(_ address: [UInt8]) -> Bool {
        let address = Self.unmapped(address)
        guard address.count == network.count else { return false }
        return Self.masked(address, prefix: prefix) == network
    }

    /// The bytes of an IP address literal; nil for anything else (a host name, a bad literal).
    public static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// An IPv4-mapped IPv6 address as its IPv4 address; any other as it is.
    public static func unmapped(_ address: [UInt8]) -> [UInt8] {
        guard address.count == 16, address[0..<10].allSatisfy({ $0 == 0 }), address[10] == 0xFF, address[11] == 0xFF else {
            return address
        }
        return Array(address[12..<16])
    }

    private static func masked(_ bytes: [UInt8], prefix: Int) -> [UInt8] {
        var result = bytes
        for index in result.indices {
            let bitsHere = max(0, min(8, prefix - index * 8))
            result[index] &= bitsHere == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - bitsHere))
        }
        return result
    }
}

/// Which client addresses may reach something: none listed in `deny`, and, when `allow` is given,
/// one listed there. A deny wins over an allow.
public struct AddressList: Sendable, Hashable {
    public var allow: [AddressRange]?
    public var deny: [AddressRange]

    public init(allow: [AddressRange]? = nil, deny: [AddressRange] = []) {
        self.allow = allow
        self.deny = deny
    }

    public var isEmpty: Bool { allow == nil && deny.isEmpty }

    public func admits(_ address: [UInt8]) -> Bool {
        if deny.contains(where: { $0.contains(address) }) { return false }
        guard let allow else { return true }
        return allow.contains { $0.contains(address) }
    }
}
