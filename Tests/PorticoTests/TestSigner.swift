import Foundation
import Portico
import PorticoCrypto
import PorticoSigning
import PorticoTestSupport

/// Signs requests for tests the way a client app would, with the server's own OpenSSL HMAC (the
/// client library has its own tests against the same vectors).
struct TestSigner {
    var keyID: String
    var secret: String
    var label = "sig1"
    var authority = "gateway.test"

    /// The headers to add to a request sent with ``RawHTTPClient`` (whose Host is `gateway.test`).
    func headers(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: String? = nil,
        components: [ComponentIdentifier]? = nil, created: Int64 = Int64(Date().timeIntervalSince1970),
        expires: Int64? = nil, nonce: String? = UUID().uuidString, keyID: String? = nil, secret: String? = nil
    ) throws -> [(String, String)] {
        var fields = headers
        if let body {
            let digest = Array(body.utf8).withUnsafeBytes { ContentDigest.value(for: $0, using: OpenSSLDigest()) }
            fields.append(("Content-Digest", digest))
        }
        var covered: [ComponentIdentifier] = [.method, .authority, .path]
        if target.contains("?") { covered.append(.query) }
        if body != nil { covered.append(.field("content-digest")) }
        let input = SignatureInput(
            components: components ?? covered, created: created, expires: expires, nonce: nonce, keyID: keyID ?? self.keyID)
        let request = HTTPRequestParts(
            method: method, scheme: "http", authority: authority, requestTarget: target,
            fields: [("host", authority)] + fields.map { ($0.0, $0.1) })
        let key = OpenSSLHMACKey(key: Array((secret ?? self.secret).utf8))!
        let signed = try MessageSignature.sign(request, input: input, label: label, authenticator: key)
        return fields + [("Signature-Input", signed.signatureInput), ("Signature", signed.signature)]
    }
}
