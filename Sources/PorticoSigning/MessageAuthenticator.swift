/// Computes HMAC-SHA256 under one key. The server backs it with OpenSSL, the client library with
/// swift-crypto; this module only defines what the signer and verifier need.
public protocol MessageAuthenticator: Sendable {
    /// The MAC of `message`: 32 bytes for `hmac-sha256`.
    func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8]

    /// Writes the MAC of `message` to `code`, which is exactly as long as a MAC; false when it
    /// could not be computed. The verifier's path: an implementation may write without allocating.
    func writeAuthenticationCode(for message: UnsafeRawBufferPointer, to code: UnsafeMutableRawBufferPointer) -> Bool
}

extension MessageAuthenticator {
    public func writeAuthenticationCode(for message: UnsafeRawBufferPointer, to code: UnsafeMutableRawBufferPointer) -> Bool {
        let mac = authenticationCode(for: message)
        guard mac.count == code.count else { return false }
        mac.withUnsafeBytes { code.copyMemory(from: $0) }
        return true
    }

    public func authenticationCode(for message: String) -> [UInt8] {
        var message = message
        return message.withUTF8 { authenticationCode(for: UnsafeRawBufferPointer($0)) }
    }
}

/// Comparisons whose running time does not depend on where two secrets differ.
public enum ConstantTime {
    /// True when `lhs` and `rhs` are equal. Every byte is visited whatever the contents; only the
    /// lengths (public: a MAC's length is fixed by its algorithm) can end it early.
    @inline(never)
    public static func equal(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        lhs.withUnsafeBytes { lhs in rhs.withUnsafeBytes { rhs in equal(lhs, rhs) } }
    }

    @inline(never)
    public static func equal(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<lhs.count {
            difference |= lhs[index] ^ rhs[index]
        }
        return difference == 0
    }
}
