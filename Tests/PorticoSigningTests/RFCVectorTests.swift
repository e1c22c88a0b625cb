import Foundation
import PorticoCrypto
import PorticoSigning
import Testing

/// The vectors in ../shared/vectors (RFC 9421 Appendix B.2.5, RFC 9530 Appendix D), reproduced
/// exactly: signature base, signature value and digests.
@Suite struct RFCVectorTests {
    /// B.1.5's shared secret; the HMAC key is the decoded 64 bytes.
    static let sharedSecret = Array(
        Data(base64Encoded: "uzvJfB4u3N0Jy4T7NZ75MDVcr8zSTInedJtkgcu46YW4XByzNJjxBdtjUkdJPBtbmHhIDi6pcl8jsasjlTMtDQ==")!)

    /// B.2's request.
    static let request = HTTPRequestParts(
        method: "POST", scheme: "https", authority: "example.com", requestTarget: "/foo?param=Value&Pet=dog",
        fields: [
            ("Host", "example.com"),
            ("Date", "Tue, 20 Apr 2021 02:07:55 GMT"),
            ("Content-Type", "application/json"),
            ("Content-Digest", "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"),
            ("Content-Length", "18"),
        ])

    static let signatureInput = #"sig-b25=("date" "@authority" "content-type");created=1618884473;keyid="test-shared-secret""#
    static let signature = "sig-b25=:pxcQw6G3AjtMBQjwo8XzkZf/bws5LelbaMk5rGIGtE8=:"

    @Test func b25SignatureBaseIsReproduced() throws {
        let parsed = try SignatureFields.select(label: nil, signatureInput: Self.signatureInput, signature: Self.signature)
        #expect(parsed.label == "sig-b25")
        #expect(parsed.input.keyID == "test-shared-secret")
        #expect(parsed.input.created == 1_618_884_473)
        #expect(parsed.input.algorithm == nil)
        let base = try SignatureBase.make(for: parsed.input, request: Self.request)
        #expect(
            base == """
                "date": Tue, 20 Apr 2021 02:07:55 GMT
                "@authority": example.com
                "content-type": application/json
                "@signature-params": ("date" "@authority" "content-type");created=1618884473;keyid="test-shared-secret"
                """)
    }

    @Test func b25SignatureIsReproducedAndVerifies() throws {
        let key = try #require(OpenSSLHMACKey(key: Self.sharedSecret))
        let input = SignatureInput(
            components: [.field("date"), .authority, .field("content-type")], created: 1_618_884_473, keyID: "test-shared-secret")
        let signed = try MessageSignature.sign(Self.request, input: input, label: "sig-b25", authenticator: key)
        #expect(signed.signatureInput == Self.signatureInput)
        #expect(signed.signature == Self.signature)

        let parsed = try SignatureFields.select(label: "sig-b25", signatureInput: Self.signatureInput, signature: Self.signature)
        #expect(try MessageSignature.verify(parsed, request: Self.request, authenticator: key))
        let wrongKey = try #require(OpenSSLHMACKey(key: Array(Self.sharedSecret.reversed())))
        #expect(try !MessageSignature.verify(parsed, request: Self.request, authenticator: wrongKey))
    }

    @Test func anAlgorithmOtherThanHMACSHA256IsRefused() throws {
        let key = try #require(OpenSSLHMACKey(key: Self.sharedSecret))
        let input = #"sig-b25=("date" "@authority" "content-type");created=1618884473;keyid="test-shared-secret";alg="ed25519""#
        let parsed = try SignatureFields.select(label: nil, signatureInput: input, signature: Self.signature)
        #expect(throws: SigningError.self) { try MessageSignature.verify(parsed, request: Self.request, authenticator: key) }
    }

    @Test func rfc9530DigestsAreReproduced() throws {
        let body = Array(#"{"hello": "world"}"#.utf8)
        let digest = OpenSSLDigest()
        body.withUnsafeBytes { bytes in
            #expect(
                ContentDigest.value(for: bytes, algorithm: .sha256, using: digest)
                    == "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:")
            #expect(
                ContentDigest.value(for: bytes, algorithm: .sha512, using: digest)
                    == "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:")
        }
        let both =
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:, sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"
        #expect(try body.withUnsafeBytes { try ContentDigest.verify(both, body: $0, using: digest) })
        var altered = body
        altered[3] ^= 1
        #expect(try !altered.withUnsafeBytes { try ContentDigest.verify(both, body: $0, using: digest) })
        #expect(throws: SigningError.self) { try body.withUnsafeBytes { try ContentDigest.verify("md5=:AAAA:", body: $0, using: digest) } }
    }

    /// The empty body's digest is answered without hashing: the constant must be the real digest,
    /// and only the empty body matches it.
    @Test func emptyContentDigestIsKnown() throws {
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        let digest = OpenSSLDigest()
        #expect(ContentDigest.value(for: empty, using: digest) == ContentDigest.emptyContentSHA256)
        #expect(try ContentDigest.verify(ContentDigest.emptyContentSHA256, body: empty, using: digest))
        #expect(
            try !Array("x".utf8).withUnsafeBytes { try ContentDigest.verify(ContentDigest.emptyContentSHA256, body: $0, using: digest) })
        let other = Array("x".utf8).withUnsafeBytes { ContentDigest.value(for: $0, using: digest) }
        #expect(try !ContentDigest.verify(other, body: empty, using: digest))
    }
}
