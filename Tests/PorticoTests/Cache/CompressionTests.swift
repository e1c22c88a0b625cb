import Foundation
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

@Suite("Response compression: gzip, brotli and zstd, negotiated, streamed, stored once")
struct CompressionTests {
    /// A JSON body long enough to compress, and compressible.
    static let body = "[" + (0..<400).map { #"{"city":"paris","temperature":\#($0 % 30),"unit":"celsius"}"# }.joined(separator: ",") + "]"

    static func policy(_ ports: [Int], compression: String = "{ algorithms: [br, gzip, zstd], minBytes: 1KiB }") -> String {
        """
        compression: \(compression)
        backends:
          origin: { url: "http://127.0.0.1:\(ports[0])", timeout: 5s }
          stream: { url: "http://127.0.0.1:\(ports[1])", timeout: 5s }
        services:
          weather:
            path: /weather
            cache: { defaultTTL: 30s }
            versions:
              1: { proxy: { backend: origin } }
          plain:
            path: /plain
            compression: false
            versions:
              1: { proxy: { backend: origin } }
          stream:
            path: /stream
            versions:
              1: { proxy: { backend: stream } }
        """
    }

    static let streamParts = (0..<20).map { index in String(repeating: "line \(index) of a long streamed answer\n", count: 40) }

    func withCompression(
        _ compression: String = "{ algorithms: [br, gzip, zstd], minBytes: 1KiB }", _ body: (TestGateway, CacheOrigin) async throws -> Void
    ) async throws {
        let origin = CacheOrigin()
        let stream: BackendServer.Handler = { _ in
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "text/plain")
            return .chunked(status: .ok, headers: headers, parts: Self.streamParts)
        }
        try await withGateway(backends: [origin.handler, stream], policy: { Self.policy($0, compression: compression) }) { gateway, _ in
            try await body(gateway, origin)
        }
    }

    @Test(
        "curl --compressed decodes each coding the client asks for, and the answer says Vary: Accept-Encoding",
        arguments: ["gzip", "br", "zstd"])
    func curlDecodes(coding: String) async throws {
        try await withCompression { gateway, origin in
            origin.answer("/plain/x", body: Self.body)
            origin.answer("/weather/x", headers: [("Cache-Control", "no-store"), ("ETag", #""e1""#)], body: Self.body)
            let url = "http://127.0.0.1:\(gateway.port)/weather/x"
            let answer = try await offThePool { try HTTP2ExchangeTests.curl(["--compressed", "-H", "Accept-Encoding: \(coding)"], url) }
            #expect(answer.status == 200)
            #expect(answer.headers["content-encoding"] == coding)
            #expect(answer.headers["vary"]?.contains("Accept-Encoding") == true)
            #expect(answer.headers["etag"] == #"W/"e1""#)
            #expect(answer.headers["content-length"] == nil)
            #expect(answer.body == Self.body)
            #expect(answer.downloaded < Self.body.utf8.count / 4)
        }
    }

    @Test("Python's brotli decodes what the gateway sends")
    func pythonBrotli() async throws {
        guard let python = InteropTests.python else { return }
        try await withCompression { gateway, origin in
            origin.answer("/weather/py", headers: [("Cache-Control", "no-store")], body: Self.body)
            let response = try gateway.connect().request("GET", "/weather/py", headers: [("Accept-Encoding", "br")])
            #expect(response.header("Content-Encoding") == "br")
            let script = "import sys, brotli; sys.stdout.buffer.write(brotli.decompress(sys.stdin.buffer.read()))"
            let decoded = try ChildProcess.run(python, ["-c", script], input: Data(response.body))
            #expect(decoded.termination == .exited(0))
            #expect(String(decoding: decoded.output, as: UTF8.self) == Self.body)
        }
    }

    @Test("q-values choose the coding; the policy's order breaks ties; q=0 refuses one")
    func negotiation() throws {
        var policy = CompressionPolicy()
        policy.algorithms = [.br, .gzip, .zstd]
        let rules = try #require(CompressionRules(policy, service: nil))
        func choose(_ field: String) -> String? {
            rules.negotiate(HTTPHeaders([("Accept-Encoding", field)]))?.rawValue
        }
        #expect(choose("gzip, br") == "br")
        #expect(choose("gzip;q=0.5, br;q=0.4") == "gzip")
        #expect(choose("br;q=0, *") == "gzip")
        #expect(choose("identity") == nil)
        #expect(choose("*;q=0") == nil)
        #expect(choose("zstd") == "zstd")
        #expect(choose("x-gzip") == "gzip")
        #expect(rules.negotiate(HTTPHeaders()) == nil)
    }

    @Test(
        "what is not compressed: short bodies, encoded ones, no-transform, event streams, images, HEAD, ranges, a service that says false")
    func notCompressed() async throws {
        try await withCompression { gateway, origin in
            let client = try gateway.connect()
            let cases: [(String, [(String, String)], String, [(String, String)])] = [
                ("/weather/short", [("Cache-Control", "no-store")], "{}", []),
                ("/weather/encoded", [("Cache-Control", "no-store"), ("Content-Encoding", "gzip")], Self.body, []),
                ("/weather/notransform", [("Cache-Control", "no-store, no-transform")], Self.body, []),
                ("/weather/events", [("Cache-Control", "no-store"), ("Content-Type", "text/event-stream")], Self.body, []),
                ("/weather/image", [("Cache-Control", "no-store"), ("Content-Type", "image/png")], Self.body, []),
                ("/plain/off", [], Self.body, []),
            ]
            for (path, headers, body, request) in cases {
                origin.answer(path, headers: headers, body: body)
                let response = try client.request("GET", path, headers: [("Accept-Encoding", "br, gzip")] + request)
                #expect(response.header("Content-Encoding") == headers.first { $0.0 == "Content-Encoding" }?.1, "\(path)")
                #expect(response.bodyText == body, "\(path)")
            }
            origin.answer("/weather/range", status: 206, headers: [("Content-Range", "bytes 0-1/2")], body: "[]")
            let range = try client.request("GET", "/weather/range", headers: [("Accept-Encoding", "gzip"), ("Range", "bytes=0-1")])
            #expect(range.status == 206)
            #expect(range.header("Content-Encoding") == nil)
            origin.answer("/weather/head", headers: [("Cache-Control", "no-store")], body: Self.body)
            let head = try client.request("HEAD", "/weather/head", headers: [("Accept-Encoding", "gzip")])
            #expect(head.header("Content-Encoding") == nil)
            #expect(head.header("Content-Length") == String(Self.body.utf8.count))
            // Compressible, but the client accepts none: identity, still marked as varying.
            let identity = try client.request("GET", "/weather/head", headers: [("Accept-Encoding", "identity")])
            #expect(identity.header("Content-Encoding") == nil)
            #expect(identity.header("Vary")?.contains("Accept-Encoding") == true)
        }
    }

    @Test("a streamed (chunked) body is compressed part by part and decodes whole")
    func streamed() async throws {
        try await withCompression { gateway, _ in
            let url = "http://127.0.0.1:\(gateway.port)/stream/s"
            let answer = try await offThePool { try HTTP2ExchangeTests.curl(["--compressed", "-H", "Accept-Encoding: gzip"], url) }
            #expect(answer.headers["content-encoding"] == "gzip")
            #expect(answer.body == Self.streamParts.joined())
        }
    }

    @Test("a stored response is compressed once per coding and served compressed from then on")
    func storedOnce() async throws {
        try await withCompression { gateway, origin in
            origin.answer("/weather/stored", headers: [("Cache-Control", "max-age=60")], body: Self.body)
            let client = try gateway.connect()
            let first = try client.request("GET", "/weather/stored", headers: [("Accept-Encoding", "br")])
            #expect(first.header("Content-Encoding") == "br")
            let afterMiss = gateway.gateway.cache.usage.bytes
            let hit = try client.request("GET", "/weather/stored", headers: [("Accept-Encoding", "br")])
            #expect(hit.header("Cache-Status") == "Portico; hit")
            #expect(hit.header("Content-Encoding") == "br")
            #expect(hit.body == first.body)
            let afterFirstHit = gateway.gateway.cache.usage.bytes
            #expect(afterFirstHit > afterMiss)
            #expect(afterFirstHit - afterMiss == hit.body.count)
            let again = try client.request("GET", "/weather/stored", headers: [("Accept-Encoding", "br")])
            #expect(again.body == first.body)
            #expect(gateway.gateway.cache.usage.bytes == afterFirstHit)
            let plain = try client.request("GET", "/weather/stored")
            #expect(plain.header("Content-Encoding") == nil)
            #expect(plain.bodyText == Self.body)
            #expect(origin.count("/weather/stored") == 1)
        }
    }
}
