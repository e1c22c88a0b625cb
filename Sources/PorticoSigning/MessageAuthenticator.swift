/// Computes HMAC-SHA256 under one key. The server backs it with OpenSSL, the client library with
/// swift-crypto; this module only defines what the signer and verifier need.
public protocol MessageAuthenticator: Sendable {
    /// The MAC of `message`: 32 bytes for `hmac-sha256`.
    func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8]
}

extension MessageAuthenticator {
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
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices {
            difference |= lhs[index] ^ rhs[index]
        }
        return difference == 0
    }
}
