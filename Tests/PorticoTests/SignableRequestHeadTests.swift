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
}
