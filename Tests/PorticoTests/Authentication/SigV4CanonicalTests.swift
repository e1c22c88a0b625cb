import Foundation
import NIOHTTP1
import PorticoPolicy
import Testing

@testable import Portico

/// The canonical request against AWS's own published example and botocore's rules.
@Suite("SigV4's canonical request")
struct SigV4CanonicalTests {
    @Test("AWS's documented IAM ListUsers example verifies with its published signature, and not a second later or with a byte changed")
    func awsExample() throws {
        let snapshot = try PolicyLoader().load(
            sources: [
                (
                    "aws.yaml",
                    """
                    listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
                    backends: { iam: { url: "http://127.0.0.1:9" } }
                    services:
                      iam:
                        path: /
                        auth: sigv4
                        sigv4: { region: us-east-1, service: iam, clockSkew: 5m }
                        versions: { 1: { proxy: { backend: iam } } }
                    keys:
                      example: { accessKeyId: AKIDEXAMPLE, secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", demo: true, services: [iam] }
                    """
                )
            ])
        let credentials = Credentials(policy: snapshot.policy)
        let service = try #require(snapshot.policy.services["iam"])
        func head(signature: String, uri: String = "/?Action=ListUsers&Version=2010-05-08") -> HTTPRequestHead {
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri)
            head.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded; charset=utf-8")
            head.headers.add(name: "Host", value: "iam.amazonaws.com")
            head.headers.add(name: "X-Amz-Date", value: "20150830T123600Z")
            head.headers.add(
                name: "Authorization",
                value:
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=\(signature)"
            )
            return head
        }
        let published = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        let signedAt = try #require(SigV4Authenticator.basicTimestamp("20150830T123600Z"))
        let authenticator = SigV4Authenticator(credentials: credentials)
        let verdict = authenticator.authenticate(
            head(signature: published), body: nil, bodyArrived: true, hasBody: false, service: service, now: signedAt)
        guard case .success(let authentication) = verdict else {
            Issue.record("refused: \(verdict)")
            return
        }
        #expect(authentication.keyID == "example")
        let altered = authenticator.authenticate(
            head(signature: published, uri: "/?Action=ListUsers&Version=2010-05-09"), body: nil, bodyArrived: true, hasBody: false,
            service: service, now: signedAt)
        guard case .failure(let problem) = altered else {
            Issue.record("accepted an altered query")
            return
        }
        #expect(problem.type == "urn:portico:problem:sigv4-invalid")
        let late = authenticator.authenticate(
            head(signature: published), body: nil, bodyArrived: true, hasBody: false, service: service, now: signedAt + 301)
        guard case .failure(let skew) = late else {
            Issue.record("accepted outside the window")
            return
        }
        #expect(skew.type == "urn:portico:problem:sigv4-clock-skew")
    }

    @Test("paths: dot segments and repeated slashes go, and every byte but the unreserved is encoded (again, for all but S3)")
    func paths() {
        #expect(SigV4Canonical.uri(path: "", encodesOnce: false) == "/")
        #expect(SigV4Canonical.uri(path: "/a/./b/../c//d/", encodesOnce: false) == "/a/c/d/")
        #expect(SigV4Canonical.uri(path: "/a%20b/€", encodesOnce: false) == "/a%2520b/%E2%82%AC")
        #expect(SigV4Canonical.uri(path: "/a%20b/../x", encodesOnce: true) == "/a%20b/../x")
    }

    @Test("queries: decoded, re-encoded with only the unreserved bare, sorted by name then value; a presigned URL's signature left out")
    func queries() {
        #expect(SigV4Canonical.query("/p?b=2&a=%7e&a=1&c&d=%2F+x", excludingSignature: false) == "a=1&a=~&b=2&c=&d=%2F%2Bx")
        #expect(SigV4Canonical.query("/p?X-Amz-Signature=ab&X-Amz-Date=1", excludingSignature: true) == "X-Amz-Date=1")
        #expect(SigV4Canonical.query("/p", excludingSignature: false) == "")
    }

    @Test("fields: every line of a signed field joined by commas, each trimmed with its runs of spaces collapsed")
    func fields() {
        var headers = HTTPHeaders()
        headers.add(name: "X-Amz-Meta", value: "  a   b ")
        headers.add(name: "x-amz-meta", value: "c,d")
        headers.add(name: "Host", value: "h")
        guard case .success(let block) = SigV4Canonical.fields(headers, signed: ["host", "x-amz-meta"]) else {
            Issue.record("missing field")
            return
        }
        #expect(block == "host:h\nx-amz-meta:a b,c,d\n")
        guard case .failure(let missing) = SigV4Canonical.fields(headers, signed: ["host", "x-other"]) else {
            Issue.record("a missing field was not noticed")
            return
        }
        #expect(missing.name == "x-other")
    }
}
