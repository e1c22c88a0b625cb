import Dispatch
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

@Suite("Proxying to a backend")
struct ProxyTests {
    static func echoPolicy(_ ports: [Int]) -> String {
        """
        backends:
          echo: { url: "http://127.0.0.1:\(ports[0])/base", connectTimeout: 1s, timeout: 5s }
        services:
          echo:
            path: /api/{version}/things
            versions:
              1: { proxy: { backend: echo, rewrite: /v1/items } }
              2: { proxy: { backend: echo } }
        """
    }

    @Test("methods, bodies and query strings arrive intact at the rewritten path", arguments: ["GET", "POST", "PUT", "DELETE"])
    func methodsBodiesAndQueries(method: String) async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, _ in
            let client = try gateway.connect()
            let body = method == "GET" ? nil : "{\"name\": \"caf\u{e9}\", \"n\": [1,2,3]}"
            let response = try client.request(
                method, "/api/1/things/a%20b/c?x=1&y=%C3%A9&empty=", headers: [("Content-Type", "application/json")], body: body)
            #expect(response.status == 200)
            let echoed = try #require(response.json)
            #expect(echoed["method"] as? String == method)
            #expect(echoed["path"] as? String == "/base/v1/items/a%20b/c")
            #expect(echoed["query"] as? String == "x=1&y=%C3%A9&empty=")
            #expect(echoed["body"] as? String == (body ?? ""))
            #expect(response.header("X-API-Version") == "1")
        }
    }

    @Test("without a rewrite the original path is forwarded under the backend's base path")
    func noRewrite() async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, _ in
            let response = try gateway.connect().request("GET", "/api/2/things/z")
            #expect(response.json?["path"] as? String == "/base/api/2/things/z")
            #expect(response.header("X-API-Version") == "2")
        }
    }

    @Test("hop-by-hop headers are dropped and forwarding headers are added")
    func hopByHopAndForwarded() async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, _ in
            let response = try gateway.connect().request(
                "GET", "/api/1/things",
                headers: [
                    // A field Connection lists is dropped whether it comes before Connection or after.
                    // `x^hop` names no field sent: `X~Hop` differs from it in more than case.
                    ("X-Early-Hop", "secret"), ("Connection", "keep-alive, X-Private-Hop, x-early-hop, x^hop"), ("X-Private-Hop", "secret"),
                    ("X~Hop", "kept"),
                    ("Keep-Alive", "timeout=5"),
                    ("TE", "trailers"), ("Upgrade", "websocket"), ("Proxy-Authorization", "Basic abc"),
                    ("X-Forwarded-For", "203.0.113.7"), ("X-End-To-End", "kept"), ("X-Request-Id", "client-id-42"),
                    ("Forwarded", "for=203.0.113.7;proto=https"), ("X-Real-IP", "203.0.113.8"), ("X-Original-URL", "/partner-only"),
                    ("X-Rewrite-URL", "/partner-only"), ("X-Forwarded-Host", "attacker.example"), ("X-Forwarded-Proto", "https"),
                    ("X-Forwarded-Port", "443"), ("True-Client-IP", "203.0.113.9"), ("X-Forwarded-For", "198.51.100.1"),
                ])
            let headers = try #require(response.json?["headers"] as? [String: String])
            for dropped in [
                "connection", "x-private-hop", "x-early-hop", "keep-alive", "te", "upgrade", "proxy-authorization", "transfer-encoding",
            ] {
                #expect(headers[dropped] == nil, "\(dropped) must not be forwarded")
            }
            // No client is a trusted proxy: what it says of itself or of its target never arrives.
            for dropped in ["forwarded", "x-real-ip", "x-original-url", "x-rewrite-url", "x-forwarded-port", "true-client-ip"] {
                #expect(headers[dropped] == nil, "\(dropped) must not be forwarded")
            }
            #expect(headers["x-end-to-end"] == "kept")
            #expect(headers["x~hop"] == "kept")
            #expect(headers["x-forwarded-for"] == "127.0.0.1")
            #expect(headers["x-forwarded-proto"] == "http")
            #expect(headers["x-forwarded-host"] == "gateway.test")
            #expect(headers["x-request-id"] == "client-id-42")
            #expect(headers["host"]?.hasPrefix("127.0.0.1:") == true)
            #expect(response.header("X-Request-Id") == "client-id-42")
        }
    }

    @Test("hop-by-hop headers of the backend's response are dropped")
    func responseHopByHop() async throws {
        let backend: BackendServer.Handler = { _ in
            var headers = HTTPHeaders()
            headers.add(name: "Connection", value: "X-Backend-Hop")
            headers.add(name: "X-Backend-Hop", value: "internal")
            headers.add(name: "Keep-Alive", value: "timeout=5")
            headers.add(name: "X-Kept", value: "yes")
            return .full(status: .created, headers: headers, body: ByteBuffer(string: "made"))
        }
        try await withGateway(backends: [backend], policy: Self.echoPolicy) { gateway, _ in
            let response = try gateway.connect().request("POST", "/api/1/things", body: "x")
            #expect(response.status == 201)
            #expect(response.bodyText == "made")
            #expect(response.header("X-Backend-Hop") == nil)
            #expect(response.header("Keep-Alive") == nil)
            #expect(response.header("X-Kept") == "yes")
        }
    }

    @Test("an ill-formed X-Request-Id is replaced by a generated one")
    func generatedRequestID() async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, _ in
            let response = try gateway.connect().request("GET", "/api/1/things", headers: [("X-Request-Id", "bad id with spaces")])
            let id = try #require(response.header("X-Request-Id"))
            #expect(id.count == 32 && id.allSatisfy(\.isHexDigit))
            #expect((response.json?["headers"] as? [String: String])?["x-request-id"] == id)
        }
    }

    @Test("a 5 MB response streams through intact")
    func largeResponse() async throws {
        let size = 5 * 1024 * 1024
        let backend: BackendServer.Handler = { _ in .stream(status: .ok, headers: HTTPHeaders(), totalBytes: size) }
        try await withGateway(backends: [backend], policy: Self.echoPolicy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("GET /api/1/things/big HTTP/1.1\r\nHost: t\r\n\r\n")
            var received = 0
            var allX = true
            let response = try client.readResponse { chunk in
                received += chunk.count
                allX = allX && chunk.allSatisfy { $0 == UInt8(ascii: "x") }
            }
            #expect(response.status == 200)
            #expect(received == size)
            #expect(allX)
            // The connection is still usable afterwards.
            try client.send("HEAD /api/1/things/big HTTP/1.1\r\nHost: t\r\n\r\n")
            let again = try client.readResponse(headRequest: true)
            #expect(again.status == 200)
            #expect(again.header("content-length") == String(size))
        }
    }

    @Test("a client that stops reading slows the backend down instead of filling the gateway's memory")
    func slowClientBackPressure() async throws {
        let size = 96 * 1024 * 1024
        let backend: BackendServer.Handler = { _ in .stream(status: .ok, headers: HTTPHeaders(), totalBytes: size) }
        // The backend timeout covers the whole exchange, paused time included: give 96 MiB room on
        // a machine other tests are loading too.
        let policy: ([Int]) -> String = { Self.echoPolicy($0).replacingOccurrences(of: "timeout: 5s", with: "timeout: 120s") }
        try await withGateway(backends: [backend], policy: policy) { gateway, servers in
            let client = try gateway.connect(receiveTimeout: 60)
            try client.send("GET /api/1/things/huge HTTP/1.1\r\nHost: t\r\n\r\n")
            try await Task.sleep(for: .seconds(1))
            // Without back-pressure the gateway would have pulled the whole body by now. With it,
            // the backend gets ahead only by the socket buffers on both sides and the gateway's credit.
            let sentWhileStalled = servers[0].streamedBytes
            #expect(sentWhileStalled < size / 3, "backend sent \(sentWhileStalled) bytes to a stalled client")
            let (response, received) = try await offThePool {
                var received = 0
                return (try client.readResponse { received += $0.count }, received)
            }
            #expect(response.status == 200)
            #expect(received == size)
        }
    }

    @Test("a chunked backend response reaches the client whole, re-framed by the gateway")
    func chunkedResponse() async throws {
        let backend: BackendServer.Handler = { _ in .chunked(status: .ok, headers: HTTPHeaders(), parts: ["alpha-", "beta-", "gamma"]) }
        try await withGateway(backends: [backend], policy: Self.echoPolicy) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/api/1/things")
            #expect(response.bodyText == "alpha-beta-gamma")
            #expect(response.header("transfer-encoding") == "chunked")
            #expect(try client.request("GET", "/api/1/things").bodyText == "alpha-beta-gamma")
        }
    }

    @Test("Expect: 100-continue is answered by the gateway, which then forwards the body without it")
    func expectContinue() async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("POST /api/1/things HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            let interim = try client.readResponse()
            #expect(interim.status == 100)
            try client.send("hello")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.json?["body"] as? String == "hello")
            #expect((response.json?["headers"] as? [String: String])?["expect"] == nil)
        }
    }

    @Test("an expectation other than 100-continue gets 417 and the body is not read")
    func unsupportedExpectation() async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, servers in
            let client = try gateway.connect()
            try client.send("POST /api/1/things HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: teapot\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 417)
            #expect(response.json?["type"] as? String == "urn:portico:problem:expectation-failed")
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("Connection: close is honoured after the response")
    func connectionClose() async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/api/1/things", headers: [("Connection", "close")])
            #expect(response.status == 200)
            #expect(response.header("connection") == "close")
            #expect(client.waitForClose())
        }
    }

    @Test("shutting down closes idle connections at once, lets a request in flight finish, then closes its connection")
    func gracefulShutdown() async throws {
        // The backend answers only when the test says so, so the order of events is the test's
        // choice, not the machine's speed.
        let answer = DispatchSemaphore(value: 0)
        let slow: BackendServer.Handler = { request in
            _ = answer.wait(timeout: .now() + 60)  // blocks only this backend's own event loop
            return DemoBackends.echo(request)
        }
        let backendGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let backend = try await BackendServer.start(group: backendGroup, handler: slow)
        // The backend timeout must outlast the hold, however long the shutdown takes to start.
        let policy = Self.echoPolicy([backend.port]).replacingOccurrences(of: "timeout: 5s", with: "timeout: 120s")
        let gateway = try await TestGateway.start(policy: policy)
        let idle = try gateway.connect(receiveTimeout: 60)
        let busy = try gateway.connect(receiveTimeout: 60)
        try busy.send("GET /api/1/things/slow HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(await eventually { backend.requestsReceived == 1 })
        // A grace period far longer than the request needs: shutdown ends as soon as it is answered.
        async let stopped: Void = gateway.gateway.shutdown(gracePeriod: .seconds(60))
        // The idle connection closes while the request is still in flight...
        let closed = try await offThePool { idle.waitForClose() }
        #expect(closed)
        // ...which is then answered, and only then is its connection closed.
        answer.signal()
        let (response, busyClosed) = try await offThePool { (try busy.readResponse(), busy.waitForClose()) }
        #expect(response.status == 200)
        #expect(response.json?["path"] as? String == "/base/v1/items/slow")
        #expect(busyClosed)
        await stopped
        #expect(throws: (any Error).self) { try gateway.connect().request("GET", "/api/1/things") }
        try await backend.shutdown()
        try await backendGroup.shutdownGracefully()
    }

    @Test("a chunked request body is forwarded whole, with a Content-Length")
    func chunkedRequestBody() async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, _ in
            let client = try gateway.connect()
            try client.send(
                "POST /api/1/things HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.json?["body"] as? String == "hello world")
            let headers = response.json?["headers"] as? [String: String]
            #expect(headers?["content-length"] == "11")
            #expect(headers?["transfer-encoding"] == nil)
        }
    }

    @Test("an HTTP/1.0 client gets a body of unknown length delimited by the connection's close")
    func http10UnknownLength() async throws {
        let backend: BackendServer.Handler = { _ in .chunked(status: .ok, headers: HTTPHeaders(), parts: ["one-", "two"]) }
        try await withGateway(backends: [backend], policy: Self.echoPolicy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("GET /api/1/things HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.header("transfer-encoding") == nil)
            #expect(response.bodyText == "one-two")
            #expect(client.waitForClose())
        }
    }

    @Test("a service bound to a host only answers requests for that host")
    func hostRouting() async throws {
        let policy: ([Int]) -> String = { ports in
            """
            backends:
              echo: { url: "http://127.0.0.1:\(ports[0])" }
            services:
              partner:
                path: /api
                host: partner.example
                versions: { 1: { proxy: { backend: echo, rewrite: /partner } } }
              public:
                path: /api
                versions: { 1: { proxy: { backend: echo, rewrite: /public } } }
            """
        }
        try await withGateway(policy: policy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("GET /api/x HTTP/1.1\r\nHost: Partner.Example:8443\r\n\r\n")
            #expect(try client.readResponse().json?["path"] as? String == "/partner/x")
            try client.send("GET /api/x HTTP/1.1\r\nHost: other.example\r\n\r\n")
            #expect(try client.readResponse().json?["path"] as? String == "/public/x")
        }
    }

    @Test("HEAD is forwarded and answered without a body")
    func head() async throws {
        try await withGateway(backends: [DemoBackends.echo], policy: Self.echoPolicy) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("HEAD", "/api/1/things")
            #expect(response.status == 200)
            #expect(response.body.isEmpty)
            #expect(try client.request("GET", "/api/1/things").json?["method"] as? String == "GET")
        }
    }

    @Test("keep-alive and pipelined requests are answered in order on one connection")
    func pipelining() async throws {
        try await withGateway(policy: Self.echoPolicy) { gateway, servers in
            let client = try gateway.connect()
            var text = ""
            for index in 0..<10 { text += "GET /api/1/things/\(index) HTTP/1.1\r\nHost: t\r\n\r\n" }
            try client.send(text)
            for index in 0..<10 {
                let response = try client.readResponse()
                #expect(response.json?["path"] as? String == "/base/v1/items/\(index)")
            }
            #expect(servers[0].requestsReceived == 10)
        }
    }
}
