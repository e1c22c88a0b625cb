import NIOCore
import NIOHTTP1
import NIOPosix
import PorticoDemoBackends
import PorticoTestSupport
import Testing

@testable import PorticoUpstream

@Suite("An upstream request's fields as lines")
struct FieldLinesTests {
    @Test("fields are written as HTTP/1.1 lines in the order added, repeated names kept, and read back the same")
    func linesAndReading() {
        var lines = FieldLines()
        lines.add(name: "Accept", value: "application/json")
        lines.add(name: "X-Tag", value: "a")
        lines.add(name: "x-tag", value: "b")
        lines.add(name: "X-Empty", value: "")
        #expect(String(decoding: lines.bytes, as: UTF8.self) == "Accept: application/json\r\nX-Tag: a\r\nx-tag: b\r\nX-Empty: \r\n")
        #expect(lines.count == 4)
        #expect(lines.map { "\($0.name)=\($0.value)" } == ["Accept=application/json", "X-Tag=a", "x-tag=b", "X-Empty="])
        #expect(lines.first(name: "X-TAG") == "a")
        #expect(lines.first(name: "x-empty") == "")
        #expect(lines.first(name: "x-ta") == nil)
        #expect(lines.contains(name: "accept"))
        #expect(!lines.contains(name: "host"))
        #expect(lines.httpHeaders[canonicalForm: "x-tag"] == ["a", "b"])
    }

    @Test("removing a name takes every field of it, any case, and keeps the others in order; replacing puts the new one last")
    func removeAndReplace() {
        var lines = FieldLines([("Host", "a"), ("X-One", "1"), ("host", "b"), ("X-Two", "2")])
        lines.remove(name: "HOST")
        #expect(String(decoding: lines.bytes, as: UTF8.self) == "X-One: 1\r\nX-Two: 2\r\n")
        #expect(lines.count == 2)
        #expect(!lines.hasHost)
        lines.replaceOrAdd(name: "X-One", value: "one")
        #expect(lines.map(\.name) == ["X-Two", "X-One"])
        #expect(lines.first(name: "x-one") == "one")
        lines.removeAll { $0.hasPrefix("X-") }
        #expect(lines.isEmpty && lines.bytes.isEmpty)
        // Removing what is not there leaves the lines as they were.
        var untouched = FieldLines([("A", "1")])
        untouched.remove(name: "b")
        #expect(untouched.bytes == Array("A: 1\r\n".utf8))
    }

    @Test("what the HTTP/1.1 head needs is noted as fields are added: Host, Connection: close, a caller's own framing")
    func noted() {
        var lines = FieldLines()
        #expect(!lines.hasHost && !lines.listsClose && !lines.hasFraming)
        lines.add(name: "HOST", value: "example.test")
        lines.add(name: "Connection", value: "keep-alive, Close")
        lines.add(name: "Transfer-Encoding", value: "chunked")
        #expect(lines.hasHost && lines.listsClose && lines.hasFraming)
        var other = FieldLines()
        other.add(name: "Connection", value: "keep-alive")
        other.add(name: "Content-Length", value: "3")
        #expect(!other.listsClose && other.hasFraming)
        other.remove(name: "content-length")
        #expect(!other.hasFraming)
    }

    @Test("a field HTTP/1.1 cannot carry is left out and makes the lines unsendable, until it is removed itself")
    func unsendable() {
        for (name, value) in [("X-Claim", "1\r\nX-Admin: yes"), ("X-Claim", "a\u{0}b"), ("X Claim", "1"), ("X-Claim:", "1"), ("", "1")] {
            var lines = FieldLines([("Accept", "*/*")])
            lines.add(name: name, value: value)
            #expect(!lines.isSendable, "\(name): \(value)")
            #expect(lines.bytes == Array("Accept: */*\r\n".utf8), "\(name)")
            lines.remove(name: "accept")
            #expect(!lines.isSendable, "\(name): removing another field kept it unsendable")
            lines.replaceOrAdd(name: "X-Other", value: "1")
            #expect(!lines.isSendable, "\(name): replacing another field kept it unsendable")
        }
        // A client's validator with a control byte (which HTTP/2 lets through), removed before a
        // cache fill as it always is: the request goes, as it did when the fields were NIO's.
        var validators = FieldLines([("Accept", "*/*")])
        validators.add(name: "If-None-Match", value: "\"a\u{1}\"")
        #expect(!validators.isSendable)
        validators.remove(name: "if-none-match")
        #expect(validators.isSendable)
        #expect(validators.bytes == Array("Accept: */*\r\n".utf8))
        var replaced = FieldLines()
        replaced.add(name: "grpc-timeout", value: "1S\u{1}")
        replaced.replaceOrAdd(name: "Grpc-Timeout", value: "2S")
        #expect(replaced.isSendable && replaced.first(name: "grpc-timeout") == "2S")
        var fine = FieldLines()
        fine.add(name: "X-Claim", value: "a\tb caf\u{E9}")
        #expect(fine.isSendable)
        #expect(fine.first(name: "x-claim") == "a\tb caf\u{E9}")
    }

    @Test("the NIO client writes a caller's lines as they are, without its framing fields, with its own length")
    func http1Head() throws {
        let request = UpstreamRequest(
            method: "POST", url: "http://127.0.0.1:8080/a?b=c",
            headers: [("Content-Length", "99"), ("X-One", "1"), ("Transfer-Encoding", "chunked"), ("Connection", "close")],
            body: ByteBuffer(string: "hello"))
        let target = try UpstreamOrigin.parse(request.url).get()
        let (head, keepAlive) = try #require(request.http1Head(for: target))
        #expect(
            String(buffer: head)
                == "POST /a?b=c HTTP/1.1\r\nX-One: 1\r\nConnection: close\r\nHost: 127.0.0.1:8080\r\nContent-Length: 5\r\n\r\n")
        #expect(!keepAlive)
        let plain = UpstreamRequest(method: "GET", url: "http://127.0.0.1:8080/", headers: [("Host", "backend.test"), ("X-One", "1")])
        let (plainHead, plainKeepAlive) = try #require(plain.http1Head(for: try UpstreamOrigin.parse(plain.url).get()))
        #expect(String(buffer: plainHead) == "GET / HTTP/1.1\r\nHost: backend.test\r\nX-One: 1\r\n\r\n")
        #expect(plainKeepAlive)
    }

    @Test("the libcurl and HTTP/2 clients refuse a request with a field left out as unsendable, and send nothing")
    func otherClientsRefuse() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let curl = CurlUpstreamClient()
        let http2 = HTTP2UpstreamClient(group: MultiThreadedEventLoopGroup.singleton)
        defer {
            curl.shutdown()
            http2.shutdown()
        }
        let request = UpstreamRequest(
            method: "GET", url: "http://127.0.0.1:\(server.port)/a", headers: [("X-Claim", "1\r\nX-Admin: yes"), ("X-One", "1")])
        for client in [curl, http2] as [any UpstreamClient] {
            let outcome = try await Exchanges.run(client, request, on: loop)
            #expect(outcome.errorKind == .invalidRequest, "\(type(of: client))")
            if case .failure(let error) = outcome.result {
                #expect(error.detail == UpstreamError.unsendableRequest.detail, "\(type(of: client))")
            }
            #expect(outcome.head == nil)
        }
        // The same client sends a request it can carry.
        let fine = try await Exchanges.run(
            curl, UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/a", headers: [("X-One", "1")]), on: loop)
        #expect(fine.head?.status == 200)
        #expect(server.requestsReceived == 1)
        try await server.shutdown()
    }
}
