import Foundation
import NIOHTTP1
import PorticoCrypto
import PorticoPolicy
import PorticoSigning
import Synchronization
import Testing

@testable import Portico

/// Every signature verification computes the same two MACs, whatever the key id: unknown, with one
/// secret, or mid-rotation with two. Otherwise a client could time which key ids exist or which are
/// being rotated. The MACs are counted through the authenticators the compiled policy is built with.
@Suite("Uniform verification work")
struct UniformVerificationTests {
    /// An OpenSSL key that counts the MACs computed with it into a shared counter.
    struct CountingKey: MessageAuthenticator {
        let key: OpenSSLHMACKey
        let count: CountedMACs

        func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8] {
            count.value.add(1, ordering: .relaxed)
            return key.authenticationCode(for: message)
        }

        func writeAuthenticationCode(for message: UnsafeRawBufferPointer, to code: UnsafeMutableRawBufferPointer) -> Bool {
            count.value.add(1, ordering: .relaxed)
            return key.writeAuthenticationCode(for: message, to: code)
        }
    }

    final class CountedMACs: Sendable {
        let value = Atomic<Int>(0)
    }

    static let now: Int64 = 1_800_000_000
    static let current = "the-current-secret-of-the-rotating-key-0123456789"
    static let previous = "the-previous-secret-of-the-rotating-key-012345678"
    static let plain = "the-only-secret-of-the-plain-key-0123456789abcdef"

    static func authenticator(counting count: CountedMACs) throws -> (RequestAuthenticator, ServicePolicy) {
        let snapshot = try PolicyLoader().load(sources: [
            (
                file: "uniform.yaml",
                text: """
                listeners: [{ name: test, address: 127.0.0.1, port: 0 }]
                signatures: { maxClockSkew: 300s, requireNonce: false }
                backends: { b: { url: "http://127.0.0.1:9" } }
                services:
                  signed: { path: /, auth: signature, versions: { 1: { proxy: { backend: b } } } }
                keys:
                  plain: { secret: \(plain), demo: true, services: [signed] }
                  rotating:
                    { secret: \(current), previousSecret: { secret: \(previous), expires: "2027-01-15T09:00:00Z" }, demo: true, services: [signed] }
                  rotated:
                    { secret: \(current), previousSecret: { secret: \(previous), expires: "2027-01-15T07:59:59Z" }, demo: true, services: [signed] }
                """
            )
        ])
        let compiled = CompiledPolicy(snapshot) { CountingKey(key: OpenSSLHMACKey(key: $0)!, count: count) }
        return (
            RequestAuthenticator(compiled, nonces: InMemoryNonceStore(capacity: 16), scheme: "http"), snapshot.policy.services["signed"]!
        )
    }

    static func head(keyID: String, secret: String) throws -> HTTPRequestHead {
        let signer = TestSigner(keyID: keyID, secret: secret)
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/quotes/AAPL")
        head.headers.add(name: "Host", value: signer.authority)
        for (name, value) in try signer.headers("GET", "/quotes/AAPL", created: now, nonce: nil) {
            head.headers.add(name: name, value: value)
        }
        return head
    }

    @Test(
        "two MACs per verification, whether the key is unknown, has one secret, is mid-rotation or past it",
        arguments: [
            ("plain", plain, true), ("plain", "a-wrong-secret-for-the-plain-key-0123456789abcdef", false),
            ("rotating", current, true), ("rotating", previous, true), ("rotated", current, true), ("rotated", previous, false),
            ("nobody", plain, false),
        ])
    func twoMACsEveryTime(keyID: String, secret: String, accepted: Bool) throws {
        let count = CountedMACs()
        let (authenticator, service) = try Self.authenticator(counting: count)
        let head = try Self.head(keyID: keyID, secret: secret)
        let before = count.value.load(ordering: .relaxed)
        let result = authenticator.authenticate(head, scheme: .signature, service: service, hasBody: false, now: Self.now)
        #expect(count.value.load(ordering: .relaxed) - before == 2)
        switch result {
        case .success(let authentication):
            #expect(accepted, "\(keyID) with that secret was accepted")
            #expect(authentication.keyID == keyID)
        case .failure(let problem):
            #expect(!accepted, "\(keyID) was refused: \(problem.detail ?? "")")
            #expect(problem.status == .unauthorized)
        }
    }
}
