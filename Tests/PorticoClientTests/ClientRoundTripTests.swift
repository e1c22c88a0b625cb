import Foundation
import PorticoClient
import PorticoSigning
import PorticoTestSupport
import PorticoTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// PorticoClient signs, the running gateway verifies: every method, with and without query and
/// body, percent-encoded paths and query values, over a raw connection and through `URLSession`.
@Suite("The client library's signatures verify at the running gateway")
struct ClientRoundTripTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var method: String
        var target: String
        var body: String?
        var testDescription: String { "\(method) \(target)\(body == nil ? "" : " with a body")" }
    }

    static let cases: [Case] = [
        Case(method: "GET", target: "/signed/items"),
        Case(method: "GET", target: "/signed/items?x=1&name=caf%C3%A9&sp=a%20b+c&empty="),
        Case(method: "GET", target: "/signed/a%20b/%E2%82%AC/%3A%40"),
        Case(method: "POST", target: "/signed/orders", body: #"{"symbol": "AAPL", "quantity": 10}"#),
        Case(method: "POST", target: "/signed/orders?dryRun=true&note=caf%C3%A9", body: "x=1&y=%20"),
        Case(method: "PUT", target: "/signed/items/7", body: #"{"name": "seven"}"#),
        Case(method: "PUT", target: "/signed/items/7?replace=1"),
        Case(method: "DELETE", target: "/signed/items/7"),
        Case(method: "DELETE", target: "/signed/items/7?reason=dup%26more", body: "because"),
    ]

    static let identity = ClientIdentity(appVersion: "2.4.1", platform: "iphone")

    static func signer() -> RequestSigner {
        var signer = RequestSigner(keyID: "app-one", secret: SignedServicesFixture.appSecret, identity: identity)
        signer.coveredFields = ["content-type"]
        return signer
    }

    @Test("signed over a raw connection, each request reaches the backend as sent", arguments: cases)
    func rawConnection(_ testCase: Case) async throws {
        try await withGateway(policy: SignedServicesFixture.policy) { gateway, _ in
            let url = try #require(URL(string: "http://gateway.test" + testCase.target))
            let headers = testCase.body == nil ? [] : [(name: "Content-Type", value: "application/json")]
            let fields = try Self.signer().sign(
                method: testCase.method, url: url, headers: headers, body: testCase.body.map { Data($0.utf8) })
            let response = try gateway.connect().request(
                testCase.method, testCase.target, headers: (headers + fields).map { ($0.name, $0.value) }, body: testCase.body)
            #expect(response.status == 200, "\(response.bodyText)")
            let echoed = try #require(response.json)
            #expect(echoed["method"] as? String == testCase.method)
            let path = testCase.target.split(separator: "?", maxSplits: 1)[0]
            #expect(echoed["path"] as? String == String(path))
            #expect(echoed["body"] as? String == (testCase.body ?? ""))
            let echoedHeaders = try #require(echoed["headers"] as? [String: String])
            #expect(echoedHeaders["x-client-version"] == "2.4.1")
            #expect(echoedHeaders["x-client-platform"] == "iphone")
            let covered = try #require(fields.first { $0.name == "Signature-Input" }?.value)
            #expect(covered.contains(#""x-client-version" "x-client-platform""#))
            #expect(covered.contains(#""content-type""#) == (testCase.body != nil))
        }
    }

    @Test("URLRequest.sign(with:) through URLSession, and a request changed after signing is refused", arguments: cases)
    func urlSession(_ testCase: Case) async throws {
        try await withGateway(policy: SignedServicesFixture.policy) { gateway, _ in
            let url = try #require(URL(string: "http://127.0.0.1:\(gateway.port)" + testCase.target))
            var request = URLRequest(url: url)
            request.httpMethod = testCase.method
            if let body = testCase.body {
                request.httpBody = Data(body.utf8)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            }
            try request.sign(with: Self.signer())
            let (data, response) = try await URLSession.shared.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode
            #expect(status == 200, "\(String(decoding: data, as: UTF8.self))")

            // Signing again draws a new nonce; then a covered field changes after signing.
            try request.sign(with: Self.signer())
            request.setValue("2.5.0", forHTTPHeaderField: "X-Client-Version")
            let (refusedData, refused) = try await URLSession.shared.data(for: request)
            #expect((refused as? HTTPURLResponse)?.statusCode == 401)
            let problem = try JSONSerialization.jsonObject(with: refusedData) as? [String: Any]
            #expect(problem?["type"] as? String == "urn:portico:problem:signature-invalid")
        }
    }
}
