import Foundation
import NIOHTTP1
import PorticoClient
import PorticoCrypto
import PorticoPolicy
import PorticoSigning
import Testing

@testable import Portico

/// One entry of `Tests/Vectors/signing-vectors.json`: a request, the key and parameters to sign it
/// with, and the fields a client must send. The expected values were computed by Python's `hmac`
/// over hand-written signature bases (`make-signing-vectors.py`), not by Portico.
struct SigningVector: Decodable, CustomTestStringConvertible {
    struct Key: Decodable {
        var text: String?
        var base64: String?
        var bytes: [UInt8] { text.map { Array($0.utf8) } ?? Array(Data(base64Encoded: base64 ?? "") ?? Data()) }
    }
    struct Request: Decodable {
        var method: String
        var url: String
        var headers: [[String]]
    }
    struct Identity: Decodable {
        var appVersion: String
        var platform: String?
    }
    struct Coverage: Decodable {
        /// `default`: what ``RequestSigner/sign(method:url:headers:body:)`` chooses by itself;
        /// `exact`: the listed components and nothing else.
        var mode: String
        var components: [String]
    }
    struct Expected: Decodable {
        var signatureBase: String
        var signatureInput: String
        var signature: String
        var contentDigest: String?
    }

    var name: String
    var key: Key
    var keyID: String
    var label: String
    var created: Int64
    var nonce: String?
    var lifetime: Int64?
    var request: Request
    var body: String?
    var identity: Identity?
    var coverage: Coverage
    var expected: Expected

    var testDescription: String { name }
    var headers: [(name: String, value: String)] { request.headers.map { ($0[0], $0[1]) } }

    static let all: [SigningVector] = {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/signing-vectors.json")
        struct File: Decodable { var vectors: [SigningVector] }
        do {
            return try JSONDecoder().decode(File.self, from: Data(contentsOf: file)).vectors
        } catch {
            fatalError("cannot read \(file.path): \(error)")
        }
    }()

    /// The client library's signer, set up as the vector says.
    func signer() -> RequestSigner {
        let created = Date(timeIntervalSince1970: TimeInterval(self.created))
        let nonce = self.nonce
        var signer = RequestSigner(
            keyID: keyID, secretBytes: key.bytes,
            identity: identity.map { ClientIdentity(appVersion: $0.appVersion, platform: $0.platform) },
            clock: { created }, nonce: { nonce ?? "" })
        signer.label = label
        signer.includesNonce = nonce != nil
        signer.lifetime = lifetime.map { .seconds($0) }
        return signer
    }

    /// The request as the gateway will parse it: the vector's fields plus what the client added.
    func head(adding fields: [(name: String, value: String)]) -> (head: HTTPRequestHead, scheme: String) {
        let components = URLComponents(string: request.url)!
        let authority = components.port.map { "\(components.percentEncodedHost!):\($0)" } ?? components.percentEncodedHost!
        var headers = HTTPHeaders([("Host", authority)] + headers.map { ($0.name, $0.value) })
        for field in fields { headers.replaceOrAdd(name: field.name, value: field.value) }
        if let body { headers.replaceOrAdd(name: "Content-Length", value: String(body.utf8.count)) }
        let target = components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        return (
            HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: target, headers: headers),
            components.scheme!
        )
    }
}

@Suite("Shared signing vectors: the client signer produces them and the gateway's verifier accepts them")
struct SharedVectorTests {
    @Test("the client signer reproduces every vector byte for byte", arguments: SigningVector.all)
    func clientReproduces(_ vector: SigningVector) throws {
        let signer = vector.signer()
        let url = try #require(URL(string: vector.request.url))
        switch vector.coverage.mode {
        case "default":
            let fields = try signer.sign(
                method: vector.request.method, url: url, headers: vector.headers, body: vector.body.map { Data($0.utf8) })
            #expect(fields.first { $0.name == "Signature-Input" }?.value == vector.expected.signatureInput)
            #expect(fields.first { $0.name == "Signature" }?.value == vector.expected.signature)
            #expect(fields.first { $0.name == "Content-Digest" }?.value == vector.expected.contentDigest)
            if let identity = vector.identity {
                #expect(fields.first { $0.name == "X-Client-Version" }?.value == identity.appVersion)
                #expect(fields.first { $0.name == "X-Client-Platform" }?.value == identity.platform)
            }
            // The base the gateway will rebuild from what was sent.
            let (head, scheme) = vector.head(adding: fields)
            let parsed = try SignatureFields.select(
                label: vector.label, signatureInput: vector.expected.signatureInput, signature: vector.expected.signature)
            let base = try SignatureBase.make(for: parsed.input, request: SignableRequestHead(head: head, scheme: scheme))
            #expect(base == vector.expected.signatureBase)
        default:
            let (head, scheme) = vector.head(adding: [])
            let request = SignableRequestHead(head: head, scheme: scheme)
            let components = vector.coverage.components.map { ComponentIdentifier($0) }
            let signed = try signer.signature(for: request, covering: components)
            #expect(signed.signatureInput == vector.expected.signatureInput)
            #expect(signed.signature == vector.expected.signature)
        }
    }

    @Test("the gateway's verifier accepts every vector, and refuses it with one byte changed", arguments: SigningVector.all)
    func gatewayAccepts(_ vector: SigningVector) throws {
        var fields = [("Signature-Input", vector.expected.signatureInput), ("Signature", vector.expected.signature)]
        if let digest = vector.expected.contentDigest { fields.append(("Content-Digest", digest)) }
        if let identity = vector.identity {
            fields.append(("X-Client-Version", identity.appVersion))
            if let platform = identity.platform { fields.append(("X-Client-Platform", platform)) }
        }
        let (head, scheme) = vector.head(adding: fields.map { (name: $0.0, value: $0.1) })
        let key = try #require(OpenSSLHMACKey(key: vector.key.bytes))
        let parsed = try SignatureFields.select(
            label: vector.label, signatureInput: vector.expected.signatureInput, signature: vector.expected.signature)
        let request = SignableRequestHead(head: head, scheme: scheme)
        #expect(try SignatureBase.make(for: parsed.input, request: request) == vector.expected.signatureBase)
        #expect(try MessageSignature.verify(parsed, request: request, authenticator: key))
        var tampered = parsed
        tampered.value[0] ^= 0x01
        #expect(try !MessageSignature.verify(tampered, request: request, authenticator: key))
        if let digest = vector.expected.contentDigest, let body = vector.body {
            #expect(try Array(body.utf8).withUnsafeBytes { try ContentDigest.verify(digest, body: $0, using: OpenSSLDigest()) })
        }

        // Vectors made with the signer's default coverage also pass the gateway's whole
        // authenticate stage (required components, time window, nonce, key status).
        guard vector.coverage.mode == "default" else { return }
        let authenticator = try Self.authenticator(for: vector, scheme: scheme)
        let service = authenticator.compiled.snapshot.policy.services["vectors"]!
        let result = authenticator.authenticate(
            head, scheme: .signature, service: service, hasBody: vector.body != nil, now: vector.created)
        switch result {
        case .success(let authentication):
            #expect(authentication.keyID == vector.keyID)
            #expect(authentication.contentDigest == vector.expected.contentDigest)
            // The gateway records the nonce once the rate-limit stage has admitted the request.
            let pending = try #require(authentication.nonce)
            #expect(pending.record(in: authenticator.nonces, now: vector.created)?.type == nil)
        case .failure(let problem):
            Issue.record("refused: \(problem.status) \(problem.detail ?? "")")
        }
        // The same request again is a replay.
        if case .failure(let problem) = authenticator.authenticate(
            head, scheme: .signature, service: service, hasBody: vector.body != nil, now: vector.created)
        {
            #expect(problem.type.hasSuffix("signature-replayed"))
        } else {
            Issue.record("a replayed vector was accepted")
        }
    }

    static func authenticator(for vector: SigningVector, scheme: String) throws -> RequestAuthenticator {
        let snapshot = try PolicyLoader().load(sources: [
            (
                file: "vectors.yaml",
                text: """
                listeners: [{ name: test, address: 127.0.0.1, port: 0 }]
                signatures: { maxClockSkew: 300s, requireNonce: true, label: \(vector.label) }
                backends: { b: { url: "http://127.0.0.1:9" } }
                services:
                  vectors: { path: /, auth: signature, versions: { 1: { proxy: { backend: b } } } }
                keys:
                  \(vector.keyID): { secret: "overwritten-with-the-vector-key-0123456789abcdef", demo: true, services: [vectors] }
                """
            )
        ])
        var policy = snapshot.policy
        policy.keys[vector.keyID]!.secret = Secret(bytes: vector.key.bytes)
        return RequestAuthenticator(
            CompiledPolicy(PolicySnapshot(policy: policy)), nonces: InMemoryNonceStore(capacity: 16), scheme: scheme)
    }
}
