import Foundation
import NIOCore
import NIOHTTP1
import Testing

@testable import Portico

@Suite("Problem details")
struct ProblemTests {
    @Test("a problem renders as RFC 9457 JSON with escaped strings and the request id as instance")
    func rendering() throws {
        let problem = Problem(
            type: "urn:portico:problem:x", title: "T \"quoted\"", status: .badGateway, detail: "line\nbreak\u{1}",
            extensions: [("backend", "b\\1")])
        let body = problem.body(requestID: "abc")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
        #expect(json["type"] as? String == "urn:portico:problem:x")
        #expect(json["title"] as? String == "T \"quoted\"")
        #expect(json["status"] as? Int == 502)
        #expect(json["detail"] as? String == "line\nbreak\u{1}")
        #expect(json["instance"] as? String == "urn:portico:request:abc")
        #expect(json["backend"] as? String == "b\\1")
        let head = problem.head(requestID: "abc", contentLength: body.readableBytes)
        #expect(head.headers["content-type"] == ["application/problem+json"])
        #expect(head.headers["x-request-id"] == ["abc"])
    }

    @Test("request ids from clients are accepted only when short and plain")
    func requestIDs() {
        #expect(RequestID.accept("abc-123_x.y:z"))
        #expect(!RequestID.accept(""))
        #expect(!RequestID.accept("has space"))
        #expect(!RequestID.accept("new\nline"))
        #expect(!RequestID.accept(String(repeating: "a", count: 129)))
        #expect(RequestID.generate() != RequestID.generate())
    }
}
