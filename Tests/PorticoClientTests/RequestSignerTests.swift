import Foundation
import PorticoSigning
import Testing

@testable import PorticoClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("RequestSigner")
struct RequestSignerTests {
    static let created = Date(timeIntervalSince1970: 1_763_800_000)
    static func signer(identity: ClientIdentity? = nil) -> RequestSigner {
        RequestSigner(
            keyID: "app", secret: "app-secret-0123456789abcdefghijklmnopqrstuvwxyz", identity: identity,
            clock: { created }, nonce: { "fixed-nonce" })
    }

    static func value(_ name: String, in fields: [(name: String, value: String)]) -> String? {
        fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    @Test("a caller's own Host field is the authority, signed once: the signature equals the one made without it")
    func callerHost() throws {
        var signer = Self.signer()
        signer.coveredFields = ["host"]
        let url = URL(string: "https://api.example.com/api/1/notes")!
        let withHost = try signer.sign(method: "GET", url: url, headers: [("Host", "api.example.com")])
        let without = try signer.sign(method: "GET", url: url)
        #expect(Self.value("signature-input", in: withHost)?.contains(#""host""#) == true)
        #expect(Self.value("signature", in: withHost) == Self.value("signature", in: without))
    }

    @Test("a secret file is read as the gateway reads it: its trailing line break is not part of the secret")
    func secretFile() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("portico-secret-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        for (written, read) in [("s3cret\n", "s3cret"), ("s3cret\r\n", "s3cret"), ("s3cret", "s3cret"), (" s3cret \n\n", " s3cret ")] {
            try written.write(toFile: path, atomically: true, encoding: .utf8)
            #expect(try await SecretSource.file(path).load() == read, "\(written.debugDescription)")
        }
    }

    @Test("a covered header whose value is not ASCII is refused with a clear error, not signed")
    func nonASCIIRefused() throws {
        var signer = Self.signer()
        signer.coveredFields = ["x-note"]
        let url = URL(string: "https://api.example.com/api/1/notes")!
        let error = #expect(throws: ClientSigningError.self) {
            try signer.sign(method: "POST", url: url, headers: [("X-Note", "café")])
        }
        #expect(error?.underlying == .nonASCIIValue(#""x-note""#))
        #expect(
            error?.description == #"cannot sign this request: the value of "x-note" is not ASCII; a signature base can only carry ASCII"#)

        // The identity fields are always covered, so a non-ASCII platform is refused the same way.
        let identified = Self.signer(identity: ClientIdentity(appVersion: "1.0", platform: "iPhöne"))
        #expect(throws: ClientSigningError.self) { try identified.sign(method: "GET", url: url) }
        // An uncovered non-ASCII field is none of the signature's business.
        #expect(throws: Never.self) { try Self.signer().sign(method: "GET", url: url, headers: [("X-Note", "café")]) }
    }

    @Test("coverage grows with the request: query, body digest, identity, and configured fields present")
    func coverage() throws {
        var signer = Self.signer(identity: ClientIdentity(appVersion: "3.0.0"))
        signer.coveredFields = ["content-type", "x-absent"]
        let fields = try signer.sign(
            method: "POST", url: URL(string: "http://127.0.0.1:8080/api/1/x?a=1")!,
            headers: [("Content-Type", "text/plain")], body: Data("hello".utf8))
        #expect(fields.map(\.name) == ["X-Client-Version", "Content-Digest", "Signature-Input", "Signature"])
        #expect(
            Self.value("signature-input", in: fields)
                == #"sig1=("@method" "@authority" "@path" "@query" "content-digest" "x-client-version" "content-type");"#
                + #"created=1763800000;nonce="fixed-nonce";keyid="app""#)
        #expect(Self.value("content-digest", in: fields) == "sha-256=:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:")

        let bare = try Self.signer().sign(method: "GET", url: URL(string: "https://api.example.com")!, body: Data())
        #expect(bare.map(\.name) == ["Signature-Input", "Signature"])
        #expect(Self.value("signature-input", in: bare)?.hasPrefix(#"sig1=("@method" "@authority" "@path");"#) == true)
    }

    @Test("lifetime adds expires; nonces are fresh and random by default")
    func parameters() throws {
        var signer = RequestSigner(keyID: "app", secret: "app-secret-0123456789abcdefghijklmnopqrstuvwxyz", clock: { Self.created })
        signer.lifetime = .seconds(30)
        let url = URL(string: "https://api.example.com/a")!
        let first = try #require(Self.value("signature-input", in: try signer.sign(method: "GET", url: url)))
        let second = try #require(Self.value("signature-input", in: try signer.sign(method: "GET", url: url)))
        #expect(first.contains(";created=1763800000;expires=1763800030;nonce=\""))
        #expect(first != second)
        let nonces = Set((0..<1000).map { _ in RequestSigner.randomNonce() })
        #expect(nonces.count == 1000)
        #expect(nonces.allSatisfy { $0.count == 22 && !$0.contains("=") && !$0.contains("+") && !$0.contains("/") })
    }

    @Test("a URL that is not absolute http(s) is refused")
    func invalidURLs() {
        for text in ["ftp://example.com/a", "/relative/path", "mailto:someone@example.com"] {
            let url = URL(string: text)!
            #expect(throws: ClientSigningError.invalidURL, "\(text)") { try Self.signer().sign(method: "GET", url: url) }
        }
    }

    @Test("URLRequest.sign(with:) sets the fields, replaces stale ones, and refuses a streamed body")
    func urlRequest() throws {
        var request = URLRequest(url: URL(string: "https://api.example.com/api/1/orders?x=1")!)
        request.httpMethod = "POST"
        request.httpBody = Data("{}".utf8)
        request.setValue("sig1=:AAAA:", forHTTPHeaderField: "Signature")
        try request.sign(with: Self.signer(identity: ClientIdentity(appVersion: "2.0", platform: "ipad")))
        #expect(request.value(forHTTPHeaderField: "X-Client-Version") == "2.0")
        #expect(request.value(forHTTPHeaderField: "X-Client-Platform") == "ipad")
        #expect(request.value(forHTTPHeaderField: "Content-Digest") == "sha-256=:RBNvo1WzZ4oRRq0W9+hknpT7T8If536DEMBg9hyq/4o=:")
        #expect(request.value(forHTTPHeaderField: "Signature")?.hasPrefix("sig1=:AAAA:") == false)
        #expect(request.value(forHTTPHeaderField: "Signature-Input")?.contains(#""@query""#) == true)

        var streamed = URLRequest(url: URL(string: "https://api.example.com/upload")!)
        streamed.httpMethod = "PUT"
        streamed.httpBodyStream = InputStream(data: Data("stream".utf8))
        #expect(throws: ClientSigningError.bodyStream) { try streamed.sign(with: Self.signer()) }
    }
}
