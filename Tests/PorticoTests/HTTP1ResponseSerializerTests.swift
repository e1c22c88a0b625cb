import NIOCore
import NIOEmbedded
import NIOHTTP1
import PorticoUpstream
import Testing

@testable import Portico

/// The gateway handler's own HTTP/1.1 response encoder writes what NIO's `HTTPResponseEncoder`
/// (the handler it replaced) wrote for the same responses to the same requests, byte for byte:
/// clients see no change of framing.
@Suite("The HTTP/1.1 response serializer")
struct HTTP1ResponseSerializerTests {
    struct Response: Sendable, CustomStringConvertible {
        var method: HTTPMethod?
        var version: HTTPVersion = .http1_1
        var status: HTTPResponseStatus
        var headers: [(String, String)] = []
        var body: [Int] = []
        var trailers: [(String, String)]?

        var description: String { "\(method.map { "\($0)" } ?? "no request") \(version) \(status.code) \(headers) \(body)" }

        var head: HTTPResponseHead { HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(headers)) }
        var bodyParts: [ByteBuffer] {
            body.enumerated().map { index, count in
                ByteBuffer(bytes: (0..<count).map { UInt8(ascii: "a") + UInt8((index + $0) % 26) })
            }
        }
    }

    static let cases: [Response] = {
        var cases: [Response] = []
        let headerSets: [[(String, String)]] = [
            [("Content-Type", "text/plain")],
            [("Content-Length", "7"), ("X-One", "1")],
            [("Transfer-Encoding", "gzip, chunked"), ("X-Two", "2")],
            [("Content-Length", "7"), ("transfer-encoding", "chunked")],
        ]
        let statuses: [HTTPResponseStatus] = [.ok, .noContent, .notModified, .notFound, .custom(code: 299, reasonPhrase: "")]
        for method in [HTTPMethod.GET, .HEAD, .POST, .CONNECT, nil] {
            for version in [HTTPVersion.http1_1, .http1_0] {
                for status in statuses {
                    for headers in headerSets {
                        for body in [[], [7], [3, 0, 4096, 5000]] {
                            cases.append(Response(method: method, version: version, status: status, headers: headers, body: body))
                        }
                    }
                }
            }
        }
        cases.append(Response(method: .GET, status: .ok, body: [5], trailers: [("grpc-status", "0"), ("X-Sum", "abc")]))
        cases.append(Response(method: .GET, status: .ok, body: [5], trailers: []))
        return cases
    }()

    /// What NIO's encoder wrote for `responses`, answering their requests in order on one
    /// connection (its request decoder tells it each request's method).
    static func nioBytes(_ responses: [Response]) throws -> String {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false)
        for response in responses {
            guard let method = response.method else { continue }
            let target = method == .CONNECT ? "example.com:443" : "/"
            try channel.writeInbound(ByteBuffer(string: "\(method) \(target) HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        }
        while try channel.readInbound(as: HTTPServerRequestPart.self) != nil {}
        for response in responses {
            channel.write(HTTPServerResponsePart.head(response.head), promise: nil)
            for part in response.bodyParts { channel.write(HTTPServerResponsePart.body(.byteBuffer(part)), promise: nil) }
            channel.write(HTTPServerResponsePart.end(response.trailers.map(HTTPHeaders.init)), promise: nil)
        }
        channel.flush()
        var bytes = ByteBuffer()
        while let part = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(var buffer) = part else {
                Issue.record("a file region")
                break
            }
            bytes.writeBuffer(&buffer)
        }
        _ = try channel.finish()
        return String(buffer: bytes)
    }

    /// What the serializer writes for `responses`, as the gateway handler uses it: the first body
    /// part beside the head when it is short, the rest one by one.
    static func serializedBytes(_ responses: [Response]) -> String {
        var serializer = HTTP1ResponseSerializer()
        var bytes = ByteBuffer()
        for response in responses {
            var head = serializer.head(response.head, answering: response.method)
            var parts = response.bodyParts[...]
            if let first = parts.first, serializer.append(body: first, to: &head) { parts = parts.dropFirst() }
            bytes.writeBuffer(&head)
            for part in parts {
                switch serializer.body(part) {
                case .none:
                    break
                case .one(var one):
                    bytes.writeBuffer(&one)
                case .chunk(var size, var data, var end):
                    #expect(part.readableBytes > HTTP1ResponseSerializer.copiedBodyLimit)
                    bytes.writeBuffer(&size)
                    bytes.writeBuffer(&data)
                    bytes.writeBuffer(&end)
                }
            }
            if var end = serializer.end(response.trailers.map(HTTPHeaders.init)) { bytes.writeBuffer(&end) }
        }
        return String(buffer: bytes)
    }

    @Test("each response is written as NIO's encoder wrote it, but for a Transfer-Encoding to an HTTP/1.0 client", arguments: cases)
    func matchesNIO(_ response: Response) throws {
        var expected = try Self.nioBytes([response])
        #expect(expected.hasPrefix("HTTP/1."))
        if response.version == .http1_0 {
            // The one difference, on purpose: NIO passed a head's own `Transfer-Encoding` to an
            // HTTP/1.0 client, and RFC 9112 §6.1 says a server must not (the serializer drops it,
            // as it does whenever it frames the body otherwise). Portico's own heads never carry
            // one: a backend's is hop-by-hop, and dropped before.
            expected = expected.split(separator: "\r\n", omittingEmptySubsequences: false)
                .filter { !$0.lowercased().hasPrefix("transfer-encoding:") }.joined(separator: "\r\n")
        }
        #expect(Self.serializedBytes([response]) == expected)
    }

    @Test("responses in a row on one connection: what one answer to HEAD or a chunked one leaves does not reach the next")
    func inARow() throws {
        let chunked = Response(method: .GET, status: .ok, body: [3, 4])
        let head = Response(method: .HEAD, status: .ok, body: [3])
        let interim = Response(method: .GET, status: .continue)
        let sized = Response(method: .GET, status: .ok, headers: [("Content-Length", "5")], body: [5])
        let sequences = [[chunked, head, chunked], [head, chunked, head], [head, sized, chunked], [chunked, sized, head]]
        for responses in sequences {
            let expected = try Self.nioBytes(responses)
            #expect(expected.split(separator: "HTTP/1.1 ").count == responses.count)
            #expect(Self.serializedBytes(responses) == expected)
        }
        // A 100 (Continue) before the final answer to HEAD does not take the request's method.
        var serializer = HTTP1ResponseSerializer()
        _ = serializer.head(interim.head, answering: .HEAD)
        var final = serializer.head(Response(method: .HEAD, status: .ok).head, answering: .HEAD)
        #expect(serializer.append(body: ByteBuffer(string: "dropped"), to: &final))
        #expect(String(buffer: final) == "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        #expect(serializer.end(nil) == nil)
    }

    @Test("a length written from a number is its decimal digits, from one to many, and a status code its three")
    func decimalLengths() {
        for length in [0, 7, 10, 99, 100, 65_536, 1_234_567_890, Int.max] {
            var serializer = HTTP1ResponseSerializer()
            var fields = serializer.beginHead(version: .http1_1, status: .notFound, answering: .GET, fieldCount: 1)
            fields.addContentLength(length)
            let head = serializer.endHead(&fields)
            #expect(String(buffer: head) == "HTTP/1.1 404 Not Found\r\nContent-Length: \(length)\r\n\r\n")
        }
    }

    @Test("a chunk's size line is its length in lower-case hexadecimal, from one digit to many")
    func chunkSizes() {
        for (size, line) in [(1, "1"), (15, "f"), (16, "10"), (255, "ff"), (4096, "1000"), (5000, "1388"), (1_048_576, "100000")] {
            var serializer = HTTP1ResponseSerializer()
            _ = serializer.head(HTTPResponseHead(version: .http1_1, status: .ok), answering: .GET)
            let body = ByteBuffer(repeating: UInt8(ascii: "x"), count: size)
            switch serializer.body(body) {
            case .one(let framed):
                #expect(size <= HTTP1ResponseSerializer.copiedBodyLimit)
                #expect(String(buffer: framed) == "\(line)\r\n" + String(repeating: "x", count: size) + "\r\n")
            case .chunk(let sizeLine, let data, let end):
                #expect(size > HTTP1ResponseSerializer.copiedBodyLimit)
                #expect(String(buffer: sizeLine) == "\(line)\r\n")
                #expect(data == body)
                #expect(String(buffer: end) == "\r\n")
            case .none:
                Issue.record("no bytes for a body of \(size)")
            }
        }
    }

    @Test("a backend's head written straight as bytes is the head the gateway built from it, then written")
    func backendHeadBytes() throws {
        let compiled = try CompiledPolicyTests.compiled()
        let backendFields: [(String, String)] = [
            ("Content-Type", "application/json"), ("Connection", "keep-alive, X-Hop"), ("X-Hop", "1"),
            ("Transfer-Encoding", "chunked"), ("Content-Length", "0005"), ("X-Request-Id", "the backend's"),
            ("Access-Control-Allow-Origin", "*"), ("Keep-Alive", "timeout=5"), ("Vary", "Accept"),
            ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), ("X-Last", "ok"),
        ]
        var compared = 0
        for version in [HTTPVersion.http1_1, .http1_0] {
            for method in [HTTPMethod.GET, .HEAD] {
                for (status, length) in [(200, Optional(5)), (200, nil), (204, nil), (304, Optional(5)), (404, nil)] {
                    for closing in [false, true] {
                        for cors in [nil, CORSDecision(allowOrigin: "https://app.example", credentials: true, exposeHeaders: "X-Last")] {
                            let head = HTTPRequestHead(version: version, method: method, uri: "/open", headers: ["Host": "gateway.example"])
                            let exchange = Exchange(head: head, requestID: "r-1", policy: compiled, client: ClientConnection())
                            exchange.version = 1
                            exchange.vary = "X-App-Version"
                            exchange.cacheStatus = "Portico; fwd=uri-miss"
                            exchange.cors = cors
                            let upstream = UpstreamResponseHead(status: status, headers: HTTPHeaders(backendFields), contentLength: length)
                            var built = HTTP1ResponseSerializer()
                            let expected = built.head(ResponseDecoration.head(upstream, for: exchange, closing: closing), answering: method)
                            var direct = HTTP1ResponseSerializer()
                            let bytes = ResponseDecoration.headBytes(upstream, for: exchange, closing: closing, serializer: &direct)
                            #expect(
                                String(buffer: bytes) == String(buffer: expected),
                                "\(version) \(method) \(status) \(closing) \(cors != nil)")
                            #expect(exchange.outcome.status == UInt(status))
                            // Both leave the serializer framing the body alike.
                            #expect(direct.end(nil) == built.end(nil))
                            compared += 1
                        }
                    }
                }
            }
        }
        #expect(compared == 80)
        // What the comparison stands on: the gateway's fields are there, the backend's hop-by-hop
        // and replaced ones are not.
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/open", headers: ["Host": "gateway.example"])
        let exchange = Exchange(head: head, requestID: "r-1", policy: compiled, client: ClientConnection())
        var serializer = HTTP1ResponseSerializer()
        let upstream = UpstreamResponseHead(status: 200, headers: HTTPHeaders(backendFields), contentLength: 5)
        let text = String(buffer: ResponseDecoration.headBytes(upstream, for: exchange, closing: true, serializer: &serializer))
        #expect(
            text == "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAccess-Control-Allow-Origin: *\r\nVary: Accept\r\n"
                + "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nX-Last: ok\r\nContent-Length: 5\r\n"
                + "X-Request-Id: r-1\r\nConnection: close\r\n\r\n")
    }
}
