import Foundation
import PorticoCrypto
import PorticoSigning
import Testing

/// The system OpenSSL behind PorticoSigning's protocols, against published vectors: HMAC-SHA256
/// (RFC 4231), SHA-1, SHA-256 and SHA-512 (FIPS 180-4's "abc"), and Ed25519 (RFC 8032 §7.1).
@Suite struct PorticoCryptoTests {
    static func bytes(hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    @Test("HMAC-SHA256 gives RFC 4231's values, through both of its calls, for short and long keys")
    func hmacVectors() throws {
        let cases: [(key: [UInt8], data: [UInt8], mac: String)] = [
            (
                Array(repeating: 0x0b, count: 20), Array("Hi There".utf8),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            (
                Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            // A key longer than the block size is hashed first (test case 6).
            (
                Array(repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
        ]
        for (key, data, mac) in cases {
            let authenticator = try #require(OpenSSLHMACKey(key: key))
            #expect(Self.hex(data.withUnsafeBytes { authenticator.authenticationCode(for: $0) }) == mac)
            var written = [UInt8](repeating: 0, count: 32)
            let ok = data.withUnsafeBytes { message in
                written.withUnsafeMutableBytes { authenticator.writeAuthenticationCode(for: message, to: $0) }
            }
            #expect(ok)
            #expect(Self.hex(written) == mac)
        }
        // A buffer of the wrong size is refused rather than overrun.
        let authenticator = try #require(OpenSSLHMACKey(key: [1, 2, 3]))
        var short = [UInt8](repeating: 0, count: 16)
        #expect(
            !Array("x".utf8).withUnsafeBytes { message in
                short.withUnsafeMutableBytes { authenticator.writeAuthenticationCode(for: message, to: $0) }
            })
    }

    @Test("SHA-1, SHA-256 and SHA-512 of \"abc\" are FIPS 180-4's")
    func digestVectors() throws {
        let abc = Array("abc".utf8)
        let digest = OpenSSLDigest()
        #expect(
            Self.hex(abc.withUnsafeBytes { digest.digest(.sha256, of: $0) })
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Self.hex(abc.withUnsafeBytes { digest.digest(.sha512, of: $0) })
                == "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd"
                + "454d4423643ce80e2a9ac94fa54ca49f")
        #expect(try Self.hex(#require(abc.withUnsafeBytes(OpenSSLDigest.sha1))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
    }

    /// RFC 8032 §7.1, test 2: a one-byte message.
    static let seed = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"
    static let publicKey = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"
    static let signature =
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"

    /// The seed as an unencrypted PKCS#8 PEM, as `openssl genpkey -algorithm ed25519` writes it.
    static var pem: String {
        let der = bytes(hex: "302e020100300506032b657004220420" + seed)
        return "-----BEGIN PRIVATE KEY-----\n" + Data(der).base64EncodedString() + "\n-----END PRIVATE KEY-----\n"
    }

    @Test("an Ed25519 key read from PEM has RFC 8032's public key and signs as RFC 8032 says")
    func ed25519Vector() throws {
        let key = try Ed25519SigningKey(pem: Self.pem)
        #expect(Self.hex(key.publicKey) == Self.publicKey)
        #expect(Self.hex(key.sign([0x72])) == Self.signature)
        #expect(key.publicKeyPEM?.hasPrefix("-----BEGIN PUBLIC KEY-----") == true)
    }

    @Test("keys that are not unencrypted Ed25519 PEM are refused with a reason; a generated one reads back")
    func ed25519Refusals() throws {
        #expect(throws: Ed25519SigningKey.KeyError.self) { try Ed25519SigningKey(pem: "not a key") }
        #expect(throws: Ed25519SigningKey.KeyError.self) {
            try Ed25519SigningKey(pem: Self.pem.replacingOccurrences(of: "PRIVATE", with: "PUBLIC"))
        }
        let generated = try #require(Ed25519SigningKey.generatePEM())
        let key = try Ed25519SigningKey(pem: generated)
        #expect(key.publicKey.count == 32)
        #expect(key.sign(Array("message".utf8)).count == 64)
    }
}
