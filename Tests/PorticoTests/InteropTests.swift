import Foundation
import PorticoTestSupport
import PorticoTesting
import Testing

/// Signatures made by an independent RFC 9421 implementation (Python's http-message-signatures
/// 3.0.0, installed by `scripts/interop/setup.sh`, which `make test` runs) verify at the gateway.
@Suite("Interoperability with another RFC 9421 implementation")
struct InteropTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let python = Repository.interopPython

    struct Signing: Encodable {
        var method: String
        var url: String
        var headers: [[String]]
        var body: String?
        var key_id = "app-one"
        var secret = SignatureAuthTests.appSecret
        var covered: [String]
        var nonce: String? = UUID().uuidString
        var label: String?
        var include_alg = true
    }

    /// The header fields the Python library adds to the request.
    static func sign(_ signing: Signing) throws -> [(String, String)] {
        let script = repositoryRoot.appendingPathComponent("scripts/interop/pyhms-sign.py").path
        let result = try ChildProcess.run(python!, [script], input: try JSONEncoder().encode(signing))
        try #require(result.termination == .exited(0), "\(String(decoding: result.errors, as: UTF8.self))")
        let data = result.output
        let fields = try #require(try JSONSerialization.jsonObject(with: data) as? [String: String])
        return fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    @Test(
        "GET and POST signed by http-message-signatures verify; with a wrong secret they do not",
        .enabled(if: python != nil, "http-message-signatures is not installed: run scripts/interop/setup.sh"))
    func pythonSignatures() async throws {
        try await withGateway(policy: SignatureAuthTests.policy) { gateway, _ in
            let date = "Tue, 20 Apr 2021 02:07:55 GMT"
            let cases: [(String, String, String?, [String], String?, Bool)] = [
                ("GET", "/signed/a?x=1&y=%C3%A9", nil, ["@method", "@authority", "@path", "@query", "date"], nil, true),
                (
                    "GET", "/signed/pets?param=Value&Pet=dog", nil,
                    ["@method", "@authority", "@path", "@query", "\"@query-param\";name=\"Pet\"", "@target-uri"], "partner", false
                ),
                ("POST", "/signed/orders", #"{"order": 42}"#, ["@method", "@authority", "@path", "date"], nil, true),
                ("PUT", "/signed/orders/7", "", ["@method", "@authority", "@path", "@request-target"], "sig1", true),
            ]
            for (method, target, body, covered, label, includeAlgorithm) in cases {
                let signing = Signing(
                    method: method, url: "http://gateway.test\(target)", headers: [["Host", "gateway.test"], ["Date", date]], body: body,
                    covered: covered, label: label, include_alg: includeAlgorithm)
                let fields = try Self.sign(signing)
                let response = try gateway.connect().request(method, target, headers: [("Date", date)] + fields, body: body)
                #expect(response.status == 200, "\(method) \(target): \(response.bodyText)")

                var forged = signing
                forged.secret = String(forged.secret.reversed())
                let refused = try gateway.connect().request(method, target, headers: [("Date", date)] + (try Self.sign(forged)), body: body)
                #expect(refused.status == 401)
            }
        }
    }
}
