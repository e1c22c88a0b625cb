import NIOHTTP1
import PorticoSigning
import Testing

@testable import Portico

/// The request head as the verifier sees it: a field's one value without an array, and the same
/// answers as the general lookup for absent and repeated fields.
@Suite struct SignableRequestHeadTests {
    @Test("onlyFieldValue is the field's value when it has one line, nil when absent or repeated, in any letter case")
    func onlyFieldValue() {
        let headers: HTTPHeaders = [
            "Host": "api.example", "Content-Digest": "sha-256=:x:", "X-Twice": "1", "x-twice": "2", "Date": " Tue ",
        ]
        let head = SignableRequestHead(head: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: headers), scheme: "https")
        let parts = HTTPRequestParts(
            method: "GET", scheme: "https", authority: "api.example", requestTarget: "/",
            fields: headers.map { ($0.name, $0.value) })
        for name in ["host", "content-digest", "x-twice", "date", "absent"] {
            let lines = head.fieldValues(name)
            let expected = lines.count == 1 ? lines[0] : nil
            #expect(head.onlyFieldValue(name) == expected, "\(name)")
            #expect(parts.onlyFieldValue(name) == expected, "\(name)")
        }
        #expect(head.onlyFieldValue("content-digest") == "sha-256=:x:")
        #expect(head.onlyFieldValue("x-twice") == nil)
        #expect(head.onlyFieldValue("absent") == nil)
    }

    @Test("the signature check's pass over the head finds each field in any letter case, the first Host, and identity fields of any name")
    func signatureHeadFields() {
        let headers: HTTPHeaders = [
            "HOST": "first.example", "host": "second.example", "Signature-Input": "sig1=()", "signature": "sig1=:AA==:",
            "SIGNATURE-INPUT": "sig2=()", "Content-Digest": "sha-256=:x:", "content-digest": "sha-256=:y:",
        ]
        let fields = SignatureHeadFields(headers, clientVersionHeader: "x-client-version", clientPlatformHeader: "x-client-platform")
        #expect(fields.host == "first.example")
        #expect(fields.signatureInput == "sig1=(), sig2=()")
        #expect(fields.signature == "sig1=:AA==:")
        #expect(fields.contentDigest == "sha-256=:x:")
        #expect(!fields.hasClientVersion && !fields.hasClientPlatform)

        // A policy may name any field for the client's identity, even one this pass reads for
        // itself; the field then counts as sent (and so must be covered) and is still read.
        let named = SignatureHeadFields(headers, clientVersionHeader: "host", clientPlatformHeader: "signature")
        #expect(named.hasClientVersion && named.hasClientPlatform)
        #expect(named.host == "first.example" && named.signature == "sig1=:AA==:")
    }
}
