import Foundation
import Portico
import PorticoClient
import PorticoCrypto
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

/// The locator's Ed25519 response signature, checked by two verifiers the gateway did not write
/// the verification of: the client library's (swift-crypto) with a pinned key, and Python's
/// http-message-signatures. A changed byte, an expired signature and another key are refused.
@Suite("Service locator signature")
struct LocatorSignatureTests {
    /// Fetches through URLSession, and lets a test change what arrives (as a CDN or an attacker
    /// between the gateway and the app could).
    final class TamperingTransport: ServiceLocatorTransport {
        enum Tamper: Sendable {
            /// `flipBodyByte` and `dropSignature` ask for a full answer (no `If-None-Match`);
            /// the others change what comes, 200 or 304.
            case none, flipBodyByte, dropSignature, dropSignatureFrom304, otherSignatureValue
            /// `Cache-Control` (which is not signed) claims ten years of freshness.
            case hugeMaxAge
        }

        let tamper = Mutex(Tamper.none)
        let real = URLSessionLocatorTransport()
        /// How many fetches reached the transport.
        let gets = Mutex(0)

        func get(_ url: URL, headers: [String: String]) async throws -> ServiceLocatorResponse {
            gets.withLock { $0 += 1 }
            let tamper = self.tamper.withLock { $0 }
            var headers = headers
            // A changed body needs a full answer, not a 304.
            if tamper == .flipBodyByte || tamper == .dropSignature { headers["If-None-Match"] = nil }
            var response = try await real.get(url, headers: headers)
            switch tamper {
            case .none: break
            case .flipBodyByte:
                let index = response.body.index(response.body.startIndex, offsetBy: response.body.count / 2)
                response.body[index] ^= 0x01
            case .dropSignature, .dropSignatureFrom304:
                response.headers["signature"] = nil
                response.headers["signature-input"] = nil
            case .otherSignatureValue:
                let other = Data(repeating: 7, count: 64).base64EncodedString()
                response.headers["signature"] = "locator=:\(other):"
            case .hugeMaxAge:
                response.headers["cache-control"] = "public, max-age=315360000"
            }
            return response
        }
    }

    static let pinned = LocatorKeys.pinned

    func withLocator(
        key: String? = LocatorKeys.signing.file,
        _ body: (TestGateway, URL) async throws -> Void
    ) async throws {
        try await withGateway(policy: LocatorTests.policy(key: key)) { gateway, _ in
            try await body(gateway, URL(string: "http://127.0.0.1:\(gateway.port)/serviceLocator.json")!)
        }
    }

    @Test("the client library verifies the gateway's signature with the pinned key, on a 200 and on a 304")
    func clientVerifies() async throws {
        try await withLocator { _, url in
            let transport = TamperingTransport()
            let client = ServiceLocatorClient(url: url, transport: transport, pinnedKey: Self.pinned)
            let endpoint = try await client.url(for: "quotes", version: "2")
            #expect(endpoint.absoluteString == "https://api.example.com:8443/gw/api/2/quotes")
            // Revalidation: the 304 carries the signature, checked against the stored bytes.
            try await client.refresh()
            // With the keyid pinned too.
            var withID = Self.pinned
            withID.keyID = CompiledKeyID.of(LocatorKeys.signing.key)
            let withKeyID = try await ServiceLocatorClient(url: url, pinnedKey: withID).refresh()
            #expect(withKeyID.services.count == 5)
        }
    }

    @Test("the signature is tagged with the document's environment; a client pinned to another environment refuses it")
    func environmentBound() async throws {
        try await withLocator { gateway, url in
            let response = try gateway.connect().request("GET", "/serviceLocator.json")
            #expect(response.header("Signature-Input")?.contains(#";tag="portico-locator:production""#) == true)
            var production = Self.pinned
            production.environment = "production"
            let document = try await ServiceLocatorClient(url: url, pinnedKey: production).refresh()
            #expect(document.environment == "production")
            var staging = Self.pinned
            staging.environment = "staging"
            await #expect(throws: ServiceLocatorError.self) { try await ServiceLocatorClient(url: url, pinnedKey: staging).refresh() }
            do {
                _ = try await ServiceLocatorClient(url: url, pinnedKey: staging).refresh()
            } catch let error as ServiceLocatorError {
                #expect("\(error)".contains("not the pinned environment staging"), "\(error)")
            }
            // A client that pins no environment takes any (as before).
            #expect(try await ServiceLocatorClient(url: url, pinnedKey: Self.pinned).refresh().services.count == 5)
        }
    }

    @Test("a changed byte, a missing or forged signature, another key, an expired signature are refused; the last good document stays")
    func clientRefuses() async throws {
        try await withLocator { _, url in
            let transport = TamperingTransport()
            let client = ServiceLocatorClient(url: url, transport: transport, pinnedKey: Self.pinned)
            let good = try await client.refresh()
            for tamper in [TamperingTransport.Tamper.flipBodyByte, .dropSignature, .otherSignatureValue] {
                transport.tamper.withLock { $0 = tamper }
                await #expect(throws: ServiceLocatorError.invalidSignature, "\(tamper)") { try await client.refresh() }
                #expect(await client.document == good, "\(tamper)")
            }
            transport.tamper.withLock { $0 = .none }
            let again = try await client.refresh()
            #expect(again == good)

            // A 304 without the signature fields leaves the stored signature, which holds for now…
            transport.tamper.withLock { $0 = .dropSignatureFrom304 }
            let revalidated = try await client.refresh()
            #expect(revalidated == good)
            // … but not once it has expired.
            let offset = Mutex(0.0)
            let aging = ServiceLocatorClient(
                url: url, transport: transport, pinnedKey: Self.pinned, clock: { Date().addingTimeInterval(offset.withLock { $0 }) })
            transport.tamper.withLock { $0 = .none }
            try await aging.refresh()
            transport.tamper.withLock { $0 = .dropSignatureFrom304 }
            offset.withLock { $0 = 120 + 30 + 60 + 5 }
            await #expect(throws: ServiceLocatorError.invalidSignature) { try await aging.refresh() }
            #expect(await aging.document == good)
            transport.tamper.withLock { $0 = .none }

            // Signed, but not by the pinned key.
            let otherKey = try PinnedLocatorKey(base64URL: LocatorSigning.base64URL(LocatorKeys.other.key.publicKey))
            await #expect(throws: ServiceLocatorError.invalidSignature) {
                try await ServiceLocatorClient(url: url, pinnedKey: otherKey).refresh()
            }
            // The right key, but a keyid pinned to another.
            var wrongID = Self.pinned
            wrongID.keyID = "ed25519-0000000000000000"
            await #expect(throws: ServiceLocatorError.invalidSignature) {
                try await ServiceLocatorClient(url: url, pinnedKey: wrongID).refresh()
            }
            // Expired: a device clock past created + maxAge (120 s) + grace (30 s) + the allowed skew (60 s).
            let late = ServiceLocatorClient(url: url, pinnedKey: Self.pinned, clock: { Date().addingTimeInterval(120 + 30 + 60 + 5) })
            await #expect(throws: ServiceLocatorError.invalidSignature) { try await late.refresh() }
            #expect(await late.document == nil)
            // Created in the future, for a clock far behind.
            let early = ServiceLocatorClient(url: url, pinnedKey: Self.pinned, clock: { Date().addingTimeInterval(-3600) })
            await #expect(throws: ServiceLocatorError.invalidSignature) { try await early.refresh() }
        }
    }

    @Test("a cached copy is not used past its signature's expiry, whatever the unsigned Cache-Control claims")
    func freshnessEndsWithTheSignature() async throws {
        try await withLocator { _, url in
            let transport = TamperingTransport()
            transport.tamper.withLock { $0 = .hugeMaxAge }
            let offset = Mutex(0.0)
            let client = ServiceLocatorClient(
                url: url, transport: transport, pinnedKey: Self.pinned, clock: { Date().addingTimeInterval(offset.withLock { $0 }) })
            _ = try await client.url(for: "quotes", version: "2")
            #expect(transport.gets.withLock { $0 } == 1)
            // Within the signature's life (maxAge 120 s + grace 30 s + skew 60 s): served from the cache.
            offset.withLock { $0 = 100 }
            _ = try await client.url(for: "quotes", version: "2")
            #expect(transport.gets.withLock { $0 } == 1)
            // Past it: the client asks again, although Cache-Control said ten years.
            offset.withLock { $0 = 120 + 30 + 60 + 5 }
            _ = try? await client.url(for: "quotes", version: "2")
            #expect(transport.gets.withLock { $0 } == 2)
        }
    }

    @Test("an unsigned document is refused by a client that pins a key, and accepted by one that does not")
    func unsignedRefused() async throws {
        try await withLocator(key: nil) { _, url in
            await #expect(throws: ServiceLocatorError.invalidSignature) {
                try await ServiceLocatorClient(url: url, pinnedKey: Self.pinned).refresh()
            }
            let unpinned = try await ServiceLocatorClient(url: url).refresh()
            #expect(unpinned.services.count == 5)
        }
    }

    struct Verification: Encodable {
        var status: Int
        var headers: [[String]]
        var body_b64: String
        var public_key_pem: String
        var key_id: String
    }

    /// What the Python library says about one response.
    static func pythonVerify(_ verification: Verification) throws -> [String: Any] {
        let script = InteropTests.repositoryRoot.appendingPathComponent("scripts/interop/pyhms-verify-response.py").path
        let result = try ChildProcess.run(InteropTests.python!, [script], input: try JSONEncoder().encode(verification))
        try #require(result.termination == .exited(0), "\(String(decoding: result.errors, as: UTF8.self))")
        let data = result.output
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test(
        "http-message-signatures verifies the locator's ed25519 signature and Content-Digest, and refuses a changed body or another key",
        .enabled(if: InteropTests.python != nil, "http-message-signatures is not installed: run scripts/interop/setup.sh"))
    func pythonVerifies() async throws {
        try await withLocator { gateway, _ in
            let response = try gateway.connect().request("GET", "/serviceLocator.json")
            let keyID = CompiledKeyID.of(LocatorKeys.signing.key)
            let verification = Verification(
                status: response.status, headers: response.headers.map { [$0.0, $0.1] },
                body_b64: Data(response.body).base64EncodedString(),
                public_key_pem: LocatorKeys.signing.key.publicKeyPEM!, key_id: keyID)
            let accepted = try Self.pythonVerify(verification)
            #expect(accepted["ok"] as? Bool == true, "\(accepted)")
            #expect(accepted["covered"] as? [String] == [#""@status""#, #""content-type""#, #""content-digest""#, #""@signature-params""#])

            var changed = verification
            var body = response.body
            body[body.count / 2] ^= 0x01
            changed.body_b64 = Data(body).base64EncodedString()
            let refusedBody = try Self.pythonVerify(changed)
            #expect(refusedBody["ok"] as? Bool == false)
            #expect((refusedBody["error"] as? String)?.contains("InvalidSignature") == true, "\(refusedBody)")

            var otherKey = verification
            otherKey.public_key_pem = LocatorKeys.other.key.publicKeyPEM!
            #expect(try Self.pythonVerify(otherKey)["ok"] as? Bool == false)

            var otherStatus = verification
            otherStatus.status = 203
            #expect(try Self.pythonVerify(otherStatus)["ok"] as? Bool == false)
        }
    }
}

/// The keyid the gateway derives for a key (no `keyId` in the policy).
enum CompiledKeyID {
    static func of(_ key: Ed25519SigningKey) -> String {
        let text = "locator: { publicBaseURL: \"https://a.example\" }\n"
        let snapshot = try! TestGateway.snapshot(policy: text + LocatorTests.services([1]))
        return LocatorSigning.keyID(for: snapshot, key: key)
    }
}
