import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// Requests signed by botocore (AWS's Python SDK core: `SigV4Auth`, `S3SigV4Auth` and their presigned
/// variants) and by `curl --aws-sigv4`, checked by the real gateway.
@Suite("AWS SigV4: botocore's and curl's signatures, presigned URLs, the body's hash, and every refusal")
struct SigV4AuthTests {
    static let python = InteropTests.python
    static let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"

    static func policy(_ ports: [Int]) -> String {
        """
        backends:
          app: { url: "http://127.0.0.1:\(ports[0])" }
        services:
          reports:
            path: /reports
            auth: sigv4
            sigv4: { region: eu-west-1, service: reports }
            versions: { 1: { proxy: { backend: app } } }
          bucket:
            path: /bucket
            auth: sigv4
            sigv4: { region: eu-west-1, service: s3, allowUnsignedPayload: true }
            versions: { 1: { proxy: { backend: app } } }
        keys:
          build-bot: { accessKeyId: AKIDEXAMPLE, secret: "\(secret)", demo: true, services: [reports, bucket] }
          bucket-only: { accessKeyId: AKIDBUCKET, secret: "\(secret)", demo: true, services: [bucket] }
        """
    }

    /// Echoes what arrived: method, target and body.
    static let backend: BackendServer.Handler = { request in
        let body = String(buffer: request.body)
        let data = try! JSONSerialization.data(withJSONObject: ["method": request.method.rawValue, "uri": request.uri, "body": body])
        return .full(status: .ok, headers: ["content-type": "application/json"], body: ByteBuffer(bytes: data))
    }

    struct Signing: Encodable {
        var method = "GET"
        var url: String
        var headers: [[String]] = []
        var body: String?
        var access_key = "AKIDEXAMPLE"
        var secret = SigV4AuthTests.secret
        var region = "eu-west-1"
        var service = "reports"
        var s3 = false
        var presign: Int?
        var age = 0
    }

    struct Signed: Decodable {
        var url: String
        var headers: [[String]]
    }

    static func sign(_ signing: Signing) throws -> Signed {
        let script = InteropTests.repositoryRoot.appendingPathComponent("scripts/interop/botocore-sign.py").path
        let result = try ChildProcess.run(python!, [script], input: try JSONEncoder().encode(signing))
        try #require(result.termination == .exited(0), "\(String(decoding: result.errors, as: UTF8.self))")
        return try JSONDecoder().decode(Signed.self, from: result.output)
    }

    /// Sends what botocore signed (its URL's target, its fields), with `body` (by default the signed one).
    static func send(
        _ gateway: TestGateway, _ signed: Signed, method: String = "GET", body: String? = nil, extra: [(String, String)] = [],
        rewrite: (String) -> String = { $0 }
    ) throws -> RawHTTPClient.Response {
        let target = String(signed.url.dropFirst("http://gateway.test".count))
        let headers = signed.headers.map { ($0[0], rewrite($0[1])) } + extra
        return try gateway.connect().request(method, target, headers: headers, body: body)
    }

    @Test(
        "botocore's signatures verify: GET with an encoded path and query, POST whose signature covers the body, S3 with x-amz-content-sha256, presigned URLs",
        .enabled(if: python != nil, "botocore is not installed: run scripts/interop/setup.sh"))
    func botocoreAccepted() async throws {
        try await withGateway(backends: [Self.backend], policy: Self.policy) { gateway, _ in
            let get = try Self.sign(Signing(url: "http://gateway.test/reports/a%20b/%E2%82%AC?x=1&y=%C3%A9&empty=&b=2"))
            let got = try Self.send(gateway, get)
            #expect(got.status == 200, "\(got.bodyText)")
            #expect(got.json?["uri"] as? String == "/reports/a%20b/%E2%82%AC?x=1&y=%C3%A9&empty=&b=2")

            let body = #"{"report":"quarterly","rows":[1,2,3]}"#
            let post = try Self.sign(
                Signing(
                    method: "POST", url: "http://gateway.test/reports/run", headers: [["Content-Type", "application/json"]], body: body))
            let posted = try Self.send(gateway, post, method: "POST", body: body)
            #expect(posted.status == 200, "\(posted.bodyText)")
            #expect(posted.json?["body"] as? String == body)

            let put = try Self.sign(
                Signing(method: "PUT", url: "http://gateway.test/bucket/key.txt", body: "hello", service: "s3", s3: true))
            #expect(put.headers.contains { $0[0].lowercased() == "x-amz-content-sha256" })
            let stored = try Self.send(gateway, put, method: "PUT", body: "hello")
            #expect(stored.status == 200, "\(stored.bodyText)")

            for (service, s3) in [("reports", false), ("s3", true)] {
                let path = s3 ? "/bucket/key.txt" : "/reports/daily"
                let presigned = try Self.sign(Signing(url: "http://gateway.test\(path)?part=1", service: service, s3: s3, presign: 300))
                #expect(presigned.url.contains("X-Amz-Signature="))
                let response = try Self.send(gateway, presigned)
                #expect(response.status == 200, "\(service): \(response.bodyText)")
            }
        }
    }

    @Test(
        "each thing wrong with a SigV4 request gets its own 401 (400 for a body that lost its hash, 403 for a key not allowed)",
        .enabled(if: python != nil, "botocore is not installed: run scripts/interop/setup.sh"))
    func refusals() async throws {
        try await withGateway(backends: [Self.backend], policy: Self.policy) { gateway, servers in
            func expect(_ name: String, _ response: RawHTTPClient.Response, _ status: Int, _ type: String) {
                #expect(response.status == status, "\(name): \(response.bodyText)")
                #expect(response.json?["type"] as? String == "urn:portico:problem:\(type)", "\(name): \(response.bodyText)")
                if status == 401 { #expect(response.header("WWW-Authenticate") == "AWS4-HMAC-SHA256", "\(name)") }
            }
            let url = "http://gateway.test/reports/x?q=1"
            let good = try Self.sign(Signing(url: url))

            expect("nothing signed", try gateway.connect().request("GET", "/reports/x"), 401, "sigv4-required")
            expect(
                "wrong secret", try Self.send(gateway, try Self.sign(Signing(url: url, secret: String(Self.secret.reversed())))), 401,
                "sigv4-invalid")
            expect(
                "unknown access key id", try Self.send(gateway, try Self.sign(Signing(url: url, access_key: "AKIDNOBODY"))), 401,
                "sigv4-invalid")
            expect("another query", try Self.send(gateway, Signed(url: url + "&more=1", headers: good.headers)), 401, "sigv4-invalid")
            expect(
                "another region", try Self.send(gateway, try Self.sign(Signing(url: url, region: "us-east-1"))), 401, "sigv4-scope-refused")
            expect(
                "another service", try Self.send(gateway, try Self.sign(Signing(url: url, service: "billing"))), 401, "sigv4-scope-refused")
            expect("an hour old", try Self.send(gateway, try Self.sign(Signing(url: url, age: 3600))), 401, "sigv4-clock-skew")
            expect(
                "presigned, past X-Amz-Expires", try Self.send(gateway, try Self.sign(Signing(url: url, presign: 60, age: 120))), 401,
                "sigv4-expired")
            expect(
                "presigned for more than maxExpires", try Self.send(gateway, try Self.sign(Signing(url: url, presign: 8 * 24 * 3600))), 401,
                "malformed-sigv4")
            expect(
                "a signed field missing",
                try Self.send(
                    gateway, good,
                    rewrite: {
                        $0.replacingOccurrences(of: "SignedHeaders=host;x-amz-date", with: "SignedHeaders=host;x-amz-date;x-custom")
                    }),
                401, "malformed-sigv4")
            expect(
                "a signed field listed twice",
                try Self.send(
                    gateway, good,
                    rewrite: { $0.replacingOccurrences(of: "SignedHeaders=host;x-amz-date", with: "SignedHeaders=host;host;x-amz-date") }),
                401, "malformed-sigv4")
            expect(
                "an x-amz field left unsigned", try Self.send(gateway, good, extra: [("X-Amz-Meta-Owner", "eve")]), 401, "malformed-sigv4")
            expect(
                "Signature given twice",
                try Self.send(
                    gateway, good, rewrite: { $0.hasPrefix("AWS4") ? $0 + ", Signature=" + String(repeating: "0", count: 64) : $0 }),
                401, "malformed-sigv4")
            expect(
                "two Authorization fields",
                try Self.send(gateway, good, extra: [("Authorization", good.headers.first { $0[0] == "Authorization" }![1])]),
                401, "malformed-sigv4")

            let body = #"{"amount":10}"#
            let post = try Self.sign(Signing(method: "POST", url: "http://gateway.test/reports/pay", body: body))
            expect(
                "body changed after signing", try Self.send(gateway, post, method: "POST", body: #"{"amount":99}"#), 401, "sigv4-invalid")
            let unsigned = try Self.sign(
                Signing(
                    method: "POST", url: "http://gateway.test/reports/pay", headers: [["X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD"]],
                    body: body))
            expect(
                "UNSIGNED-PAYLOAD where the policy refuses it", try Self.send(gateway, unsigned, method: "POST", body: body), 401,
                "sigv4-unsigned-payload-refused")
            let put = try Self.sign(Signing(method: "PUT", url: "http://gateway.test/bucket/k", body: "hello", service: "s3", s3: true))
            expect(
                "body unlike x-amz-content-sha256", try Self.send(gateway, put, method: "PUT", body: "jello"), 400, "sigv4-payload-mismatch"
            )
            expect(
                "a key not allowed here", try Self.send(gateway, try Self.sign(Signing(url: url, access_key: "AKIDBUCKET"))), 403,
                "key-not-allowed")
            // Nothing refused reached the backend; the one genuine request below does.
            #expect(servers[0].requestsReceived == 0)
            #expect(try Self.send(gateway, good).status == 200)
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test(
        "the access log names the scheme and key (or the token's subject), the metrics count failures by service, scheme and reason; a client waiting on 100 Continue is told to send the body the signature covers",
        .enabled(if: python != nil, "botocore is not installed: run scripts/interop/setup.sh"))
    func logsMetricsAndContinue() async throws {
        let recorder = RecordingLogHandler()
        try await withGateway(backends: [Self.backend], logger: Logger(label: "test") { _ in recorder }, policy: Self.policy) {
            gateway, _ in
            let body = #"{"report":"weekly"}"#
            let signed = try Self.sign(Signing(method: "POST", url: "http://gateway.test/reports/run", body: body))
            let client = try gateway.connect()
            var head = "POST /reports/run HTTP/1.1\r\nHost: gateway.test\r\nContent-Length: \(body.utf8.count)\r\nExpect: 100-continue\r\n"
            for field in signed.headers { head += "\(field[0]): \(field[1])\r\n" }
            try client.send(head + "\r\n")
            let interim = try client.readResponse()
            #expect(interim.status == 100)
            try client.send(body)
            let final = try client.readResponse()
            #expect(final.status == 200, "\(final.bodyText)")
            #expect(final.json?["body"] as? String == body)

            let forged = try Self.send(gateway, try Self.sign(Signing(url: "http://gateway.test/reports/x", secret: "nope")))
            #expect(forged.status == 401)
            let metrics = gateway.gateway.metrics.render()
            #expect(
                metrics.contains(#"portico_authentication_failures_total{service="reports",scheme="sigv4",reason="sigv4_invalid"} 1"#),
                "\(metrics)")
        }
        let lines = recorder.records.filter { $0.message == "access" }
        #expect(lines.count == 2)
        #expect(lines.first?.metadata["auth"]?.description == "sigv4")
        #expect(lines.first?.metadata["key"]?.description == "build-bot")
        #expect(lines.last?.metadata["auth"]?.description == "sigv4")
        #expect(lines.last?.metadata["key"] == nil)
    }

    @Test(
        "keys rotate and are revoked by reload: the previous secret verifies until it expires, a revoked key gets 403",
        .enabled(if: python != nil, "botocore is not installed: run scripts/interop/setup.sh"))
    func rotationByReload() async throws {
        let newSecret = "a-new-secret-access-key-0123456789abcdefghij"
        let expires = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3600))
        try await withGateway(backends: [Self.backend], policy: Self.policy) { gateway, servers in
            let url = "http://gateway.test/reports/x"
            #expect(try Self.send(gateway, try Self.sign(Signing(url: url))).status == 200)
            let rotated = Self.policy([servers[0].port]).replacingOccurrences(
                of: "build-bot: { accessKeyId: AKIDEXAMPLE, secret: \"\(Self.secret)\",",
                with:
                    "build-bot: { accessKeyId: AKIDEXAMPLE, secret: \"\(newSecret)\", previousSecret: { secret: \"\(Self.secret)\", expires: \"\(expires)\" },"
            )
            #expect(rotated != Self.policy([servers[0].port]))
            try gateway.reload(policy: rotated)
            #expect(try Self.send(gateway, try Self.sign(Signing(url: url))).status == 200)
            #expect(try Self.send(gateway, try Self.sign(Signing(url: url, secret: newSecret))).status == 200)
            try gateway.reload(
                policy: rotated.replacingOccurrences(
                    of: "previousSecret: { secret: \"\(Self.secret)\", expires: \"\(expires)\" },", with: "status: revoked,"))
            let revoked = try Self.send(gateway, try Self.sign(Signing(url: url, secret: newSecret)))
            #expect(revoked.status == 403)
            #expect(revoked.json?["type"] as? String == "urn:portico:problem:key-revoked")
            #expect(try Self.send(gateway, try Self.sign(Signing(url: url))).status == 401)
        }
    }

    @Test("curl --aws-sigv4 signs GET and POST that verify; with another secret they do not")
    func curlSigned() async throws {
        try await withGateway(backends: [Self.backend], policy: Self.policy) { gateway, _ in
            let base = "http://127.0.0.1:\(gateway.port)"
            let signing = ["--aws-sigv4", "aws:amz:eu-west-1:reports", "--user", "AKIDEXAMPLE:\(Self.secret)"]
            // curl 7.88 signs the query as written rather than sorted (later versions sort it), so
            // the parameters are given in AWS's order here.
            let get = try HTTP2ExchangeTests.curl(signing, "\(base)/reports/daily?day=1&format=csv")
            #expect(get.status == 200, "\(get.body)")
            let post = try HTTP2ExchangeTests.curl(
                signing + ["-H", "Content-Type: application/json", "--data-binary", #"{"a":1}"#], "\(base)/reports/run")
            #expect(post.status == 200, "\(post.body)")
            #expect(post.body.contains(#"{\"a\":1}"#))
            let wrong = try HTTP2ExchangeTests.curl(
                ["--aws-sigv4", "aws:amz:eu-west-1:reports", "--user", "AKIDEXAMPLE:not-the-secret"], "\(base)/reports/daily")
            #expect(wrong.status == 401)
            #expect(wrong.body.contains("urn:portico:problem:sigv4-invalid"))
        }
    }
}
