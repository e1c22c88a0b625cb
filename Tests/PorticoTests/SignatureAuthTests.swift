import Foundation
import Logging
import PorticoCrypto
import PorticoDemoBackends
import PorticoSigning
import PorticoTestSupport
import PorticoTesting
import RawStructuredFieldValues
import Testing

@testable import Portico

@Suite("Signature and API-key authentication through the running gateway")
struct SignatureAuthTests {
    static let appSecret = SignedServicesFixture.appSecret
    static let revokedSecret = SignedServicesFixture.revokedSecret
    static let signer = TestSigner(keyID: "app-one", secret: appSecret)

    static func policy(_ ports: [Int]) -> String { SignedServicesFixture.policy(ports) }

    @Test("a correctly signed GET and POST pass, with the key id and no secret in the access log")
    func signedRequestsPass() async throws {
        let recorder = RecordingLogHandler()
        let backend = try await BackendServer.start(handler: DemoBackends.echo)
        let gateway = try await TestGateway.start(policy: Self.policy([backend.port]), logger: Logger(label: "test") { _ in recorder })
        let client = try gateway.connect()
        let get = try client.request(
            "GET", "/signed/items?x=1&y=%C3%A9", headers: try Self.signer.headers("GET", "/signed/items?x=1&y=%C3%A9"))
        #expect(get.status == 200, "\(get.bodyText)")
        #expect(get.json?["path"] as? String == "/signed/items")

        let body = #"{"order": 42}"#
        let post = try client.request(
            "POST", "/signed/orders", headers: try Self.signer.headers("POST", "/signed/orders", body: body), body: body)
        #expect(post.status == 200, "\(post.bodyText)")
        #expect(post.json?["body"] as? String == body)
        await gateway.shutdown()
        try await backend.shutdown()

        let lines = recorder.records.filter { $0.message == "access" }
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.metadata["key"]?.description == "app-one" })
        let everything = recorder.records.map { "\($0.message) \($0.metadata)" }.joined()
        #expect(!everything.contains(Self.appSecret))
    }

    @Test("each kind of tampering or misuse gets its own status and problem type")
    func refusals() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let now = Int64(Date().timeIntervalSince1970)
            let body = #"{"order": 42}"#
            let signer = Self.signer

            func check(
                _ method: String, _ target: String, _ headers: [(String, String)], body: String? = nil,
                status: Int, type: String, detail: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
            ) throws {
                let response = try gateway.connect().request(method, target, headers: headers, body: body)
                #expect(response.status == status, "\(response.bodyText)", sourceLocation: sourceLocation)
                #expect(response.json?["type"] as? String == "urn:portico:problem:\(type)", sourceLocation: sourceLocation)
                #expect(response.header("Content-Type") == "application/problem+json", sourceLocation: sourceLocation)
                if let detail {
                    let text = response.json?["detail"] as? String ?? ""
                    #expect(text.contains(detail), "\(text)", sourceLocation: sourceLocation)
                }
                #expect(!response.bodyText.contains(Self.appSecret), sourceLocation: sourceLocation)
            }

            // No signature at all.
            try check("GET", "/signed/a", [], status: 401, type: "signature-required")
            // Tampered method, path, query, covered header: the MAC no longer matches.
            try check("DELETE", "/signed/a", try signer.headers("GET", "/signed/a"), status: 401, type: "signature-invalid")
            try check("GET", "/signed/b", try signer.headers("GET", "/signed/a"), status: 401, type: "signature-invalid")
            try check("GET", "/signed/a?x=2", try signer.headers("GET", "/signed/a?x=1"), status: 401, type: "signature-invalid")
            var covered = try signer.headers(
                "GET", "/signed/a", headers: [("X-Client-Version", "2.0.0")],
                components: [.method, .authority, .path, .field("x-client-version")])
            covered[0] = ("X-Client-Version", "9.9.9")
            try check("GET", "/signed/a", covered, status: 401, type: "signature-invalid")
            // Tampered body: the signature holds, the digest does not.
            try check(
                "POST", "/signed/a", try signer.headers("POST", "/signed/a", body: body), body: #"{"order": 43}"#,
                status: 400, type: "content-digest-mismatch")
            // A required component not covered: named in the detail.
            try check(
                "GET", "/signed/a", try signer.headers("GET", "/signed/a", components: [.method, .authority]),
                status: 401, type: "signature-incomplete", detail: "\"@path\"")
            try check(
                "POST", "/signed/a", try signer.headers("POST", "/signed/a", components: [.method, .authority, .path]), body: body,
                status: 401, type: "signature-incomplete", detail: "content-digest")
            try check(
                "GET", "/signed/a", try signer.headers("GET", "/signed/a", nonce: nil), status: 401, type: "signature-incomplete",
                detail: "nonce")
            // The client-version field, sent in any case, must be covered (it picks the API version).
            var uncovered = try signer.headers("GET", "/signed/a")
            uncovered.append(("x-CLIENT-Version", "2.0.0"))
            try check("GET", "/signed/a", uncovered, status: 401, type: "signature-incomplete", detail: "x-client-version")
            // Expired, and created too far in the future (with the server's time to correct by).
            try check(
                "GET", "/signed/a", try signer.headers("GET", "/signed/a", created: now - 60, expires: now - 5),
                status: 401, type: "signature-expired")
            let skewed = try gateway.connect().request(
                "GET", "/signed/a", headers: try signer.headers("GET", "/signed/a", created: now + 3600))
            let answered = Int64(Date().timeIntervalSince1970)
            #expect(skewed.status == 401)
            #expect(skewed.json?["type"] as? String == "urn:portico:problem:clock-skew")
            let serverTime = try #require(Int64(skewed.json?["serverTime"] as? String ?? ""))
            // The gateway's time, read while it handled the request: between the test's two readings.
            #expect(serverTime >= now && serverTime <= answered, "\(now) ≤ \(serverTime) ≤ \(answered)")
            #expect(skewed.header("Date")?.hasSuffix(" GMT") == true)
            // Unknown key and wrong secret: the same answer.
            try check("GET", "/signed/a", try signer.headers("GET", "/signed/a", keyID: "nobody"), status: 401, type: "signature-invalid")
            try check(
                "GET", "/signed/a", try signer.headers("GET", "/signed/a", secret: String(Self.appSecret.reversed())),
                status: 401, type: "signature-invalid")
            // Revoked key, and a service the key may not call.
            try check(
                "GET", "/signed/a", try signer.headers("GET", "/signed/a", keyID: "old-app", secret: Self.revokedSecret),
                status: 403, type: "key-revoked")
            try check("GET", "/other/a", try signer.headers("GET", "/other/a"), status: 403, type: "key-not-allowed")
            // Garbage and duplicate labels.
            try check(
                "GET", "/signed/a", [("Signature-Input", "sig1=(\"@method\" oops"), ("Signature", "sig1=:AAAA:")],
                status: 400, type: "malformed-signature")
            var doubled = try signer.headers("GET", "/signed/a")
            doubled[0].1 += ", " + doubled[0].1
            try check("GET", "/signed/a", doubled, status: 400, type: "malformed-signature", detail: "more than once")
        }
    }

    @Test("mangled signature fields get 400 or 401 (200 only when they still mean the same), and the gateway keeps serving")
    func mangledFields() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            var generator = SystemRandomNumberGenerator()
            let client = try gateway.connect()
            let alphabet = Array(#"sig1=("@method" "@path");created=17;keyid="k"nonce:AB+/=,\*%-_.0123456789"#.utf8)
            /// What a pair of fields means: the selected signature's parameters and bytes.
            func meaning(_ fields: [(String, String)]) -> String? {
                guard let signature = try? SignatureFields.select(label: nil, signatureInput: fields[0].1, signature: fields[1].1),
                    let parameters = try? signature.input.serialized()
                else { return nil }
                return signature.label + " " + parameters + " " + signature.value.map(String.init).joined(separator: ",")
            }
            for round in 0..<300 {
                let original = try Self.signer.headers("GET", "/signed/a")
                var headers = original
                let field = round % 2  // Signature-Input or Signature
                var bytes = Array(headers[field].1.utf8)
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    let position = Int.random(in: 0..<bytes.count, using: &generator)
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0: bytes[position] = alphabet.randomElement(using: &generator)!
                    case 1: bytes.remove(at: position)
                    default: bytes.insert(alphabet.randomElement(using: &generator)!, at: position)
                    }
                    if bytes.isEmpty { bytes = [UInt8(ascii: "x")] }
                }
                headers[field].1 = String(decoding: bytes, as: UTF8.self)
                let response = try client.request("GET", "/signed/a", headers: headers)
                // A mutation can leave the meaning intact (the same character, an extra space inside
                // the inner list, unused base64 bits); only then may the request pass.
                let unchanged = meaning(headers) != nil && meaning(headers) == meaning(original)
                let expected: Set<Int> = unchanged ? [200] : [400, 401]
                #expect(expected.contains(response.status), "\(headers[field].1) -> \(response.status) \(response.bodyText)")
            }
            #expect(try client.request("GET", "/signed/a", headers: try Self.signer.headers("GET", "/signed/a")).status == 200)
        }
    }

    @Test("a replayed nonce is refused, a fresh one passes")
    func replay() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let headers = try Self.signer.headers("GET", "/signed/a", nonce: "nonce-1")
            let first = try gateway.connect().request("GET", "/signed/a", headers: headers)
            #expect(first.status == 200)
            let again = try gateway.connect().request("GET", "/signed/a", headers: headers)
            #expect(again.status == 401)
            #expect(again.json?["type"] as? String == "urn:portico:problem:signature-replayed")
            let fresh = try gateway.connect().request(
                "GET", "/signed/a", headers: try Self.signer.headers("GET", "/signed/a", nonce: "nonce-2"))
            #expect(fresh.status == 200)
        }
    }

    @Test("a 100 KB Signature header is bounded by the head limit")
    func hugeSignatureHeader() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            var headers = try Self.signer.headers("GET", "/signed/a")
            headers[1].1 = "sig1=:" + String(repeating: "A", count: 100_000) + ":"
            let response = try gateway.connect().request("GET", "/signed/a", headers: headers)
            #expect(response.status == 431)
            // The gateway keeps serving.
            #expect(try gateway.connect().request("GET", "/signed/a", headers: try Self.signer.headers("GET", "/signed/a")).status == 200)
        }
    }

    @Test("signatures from other conforming signers verify: extra components, any label, any parameter order, escaped keyid")
    func interoperability() async throws {
        let policy: ([Int]) -> String = { ports in
            Self.policy(ports).replacingOccurrences(
                of: "keys:\n", with: "keys:\n  \"we\\\\ird\\\"id\": { secret: \"\(Self.appSecret)\", demo: true, services: [signed] }\n")
        }
        try await withGateway(policy: policy) { gateway, _ in
            let now = Int64(Date().timeIntervalSince1970)
            let date = "Tue, 20 Apr 2021 02:07:55 GMT"
            let key = OpenSSLHMACKey(key: Array(Self.appSecret.utf8))!
            // Parameters in an unusual order, an extra covered `date`, a covered empty-body digest,
            // a label other than sig1, and a keyid with escapes.
            let emptyDigest = [UInt8]().withUnsafeBytes { ContentDigest.value(for: $0, using: OpenSSLDigest()) }
            let input = SignatureInput(
                components: [.field("date"), .path, .method, .field("content-digest"), .authority],
                parameters: [("keyid", .string("we\\ird\"id")), ("nonce", .string("n-\(now)")), ("created", .integer(now))])
            let fields = [("Date", date), ("Content-Digest", emptyDigest)]
            let request = HTTPRequestParts(
                method: "GET", scheme: "http", authority: "gateway.test", requestTarget: "/signed/x",
                fields: [("host", "gateway.test")] + fields.map { ($0.0, $0.1) })
            let signed = try MessageSignature.sign(request, input: input, label: "partner-sig", authenticator: key)
            #expect(signed.signatureInput.contains(#"keyid="we\\ird\"id""#))
            let response = try gateway.connect().request(
                "GET", "/signed/x", headers: fields + [("Signature-Input", signed.signatureInput), ("Signature", signed.signature)])
            #expect(response.status == 200, "\(response.bodyText)")
        }
    }

    @Test("API keys: the right key passes, a wrong secret and an unknown key get identical answers, the key is not forwarded")
    func apiKeys() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let good = try gateway.connect().request("GET", "/keyed/a", headers: [("X-API-Key", "app-one.\(Self.appSecret)")])
            #expect(good.status == 200)
            let forwarded = try #require(good.json?["headers"] as? [String: String])
            #expect(forwarded["x-api-key"] == nil)

            let wrong = try gateway.connect().request("GET", "/keyed/a", headers: [("X-API-Key", "app-one.not-the-secret")])
            let unknown = try gateway.connect().request("GET", "/keyed/a", headers: [("X-API-Key", "nobody.\(Self.appSecret)")])
            #expect(wrong.status == 401)
            #expect(unknown.status == 401)
            func stripped(_ response: RawHTTPClient.Response) -> [String: String] {
                var json = (response.json ?? [:]).compactMapValues { $0 as? String }
                json["instance"] = nil
                return json
            }
            #expect(stripped(wrong) == stripped(unknown))
            #expect(wrong.header("WWW-Authenticate") == unknown.header("WWW-Authenticate"))

            let missing = try gateway.connect().request("GET", "/keyed/a")
            #expect(missing.status == 401)
            #expect(missing.json?["type"] as? String == "urn:portico:problem:api-key-required")
            let revoked = try gateway.connect().request("GET", "/keyed/a", headers: [("X-API-Key", "old-app.\(Self.revokedSecret)")])
            #expect(revoked.status == 403)
        }
    }

    @Test("rotation: current and previous secrets both verify until the previous one expires")
    func rotation() async throws {
        let current = "current-secret-0123456789abcdefghijklmnopqrstuvwxyz"
        let previous = "previous-secret-0123456789abcdefghijklmnopqrstuvwxy"
        func policy(expires: String) -> ([Int]) -> String {
            { ports in
                """
                backends:
                  echo: { url: "http://127.0.0.1:\(ports[0])" }
                services:
                  signed: { path: /signed, auth: signature, versions: { 1: { proxy: { backend: echo } } } }
                  keyed: { path: /keyed, auth: apiKey, versions: { 1: { proxy: { backend: echo } } } }
                keys:
                  rotating:
                    secret: "\(current)"
                    previousSecret: { secret: "\(previous)", expires: "\(expires)" }
                    demo: true
                    services: ["*"]
                """
            }
        }
        let formatter = ISO8601DateFormatter()
        let future = formatter.string(from: Date().addingTimeInterval(3600))
        let past = formatter.string(from: Date().addingTimeInterval(-1))
        let signer = TestSigner(keyID: "rotating", secret: current)
        try await withGateway(policy: policy(expires: future)) { gateway, _ in
            for secret in [current, previous] {
                let signed = try gateway.connect().request(
                    "GET", "/signed/a", headers: try signer.headers("GET", "/signed/a", secret: secret))
                #expect(signed.status == 200)
                let keyed = try gateway.connect().request("GET", "/keyed/a", headers: [("X-API-Key", "rotating.\(secret)")])
                #expect(keyed.status == 200)
            }
        }
        try await withGateway(policy: policy(expires: past)) { gateway, _ in
            let currentOK = try gateway.connect().request("GET", "/signed/a", headers: try signer.headers("GET", "/signed/a"))
            #expect(currentOK.status == 200)
            let previousRefused = try gateway.connect().request(
                "GET", "/signed/a", headers: try signer.headers("GET", "/signed/a", secret: previous))
            #expect(previousRefused.status == 401)
            let keyed = try gateway.connect().request("GET", "/keyed/a", headers: [("X-API-Key", "rotating.\(previous)")])
            #expect(keyed.status == 401)
        }
    }
}
