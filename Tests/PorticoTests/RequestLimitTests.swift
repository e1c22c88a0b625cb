import Foundation
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@Suite("Bad and oversized requests")
struct RequestLimitTests {
    /// A short head timeout for the tests that wait on it; an idle timeout long enough that no test
    /// that pauses between its requests (on a loaded machine) meets it by accident.
    static func policy(_ ports: [Int]) -> String { policy(ports, idleTimeout: "30s") }

    static func policy(_ ports: [Int], idleTimeout: String) -> String {
        "limits: { maxBodyBytes: 1000, maxHeadBytes: 2048, maxHeaderCount: 20, headTimeout: 400ms, idleTimeout: \(idleTimeout) }\n"
            + echoServicePolicy(ports)
    }

    /// The gateway still serves a fresh connection after whatever the test did to another one.
    static func stillServes(_ gateway: TestGateway) throws {
        #expect(try gateway.connect().request("GET", "/echo").status == 200)
    }

    @Test(
        "a malformed request line gets 400 problem+json and the connection closes",
        arguments: [
            "GARBAGE\r\n\r\n", "GET /echo HTTP/9.9\r\n\r\n", "GET /echo HTTP/1.1\r\nBad Header\r\n\r\n",
            "G@T /echo HTTP/1.1\r\nHost: x\r\n\r\n",
        ])
    func malformed(request: String) async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            try client.send(request)
            let response = try client.readResponse()
            #expect(response.status == 400)
            #expect(response.header("content-type") == "application/problem+json")
            #expect(response.json?["type"] as? String == "urn:portico:problem:malformed-request")
            #expect(response.header("x-request-id") != nil)
            #expect(client.waitForClose())
            try Self.stillServes(gateway)
        }
    }

    @Test("a request target that is not a path gets 400")
    func absoluteForm() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let response = try gateway.connect().request("GET", "http://elsewhere.example/echo")
            #expect(response.status == 400)
            #expect(response.json?["type"] as? String == "urn:portico:problem:bad-request")
        }
    }

    @Test("an oversized head gets 431")
    func oversizedHead() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/echo", headers: [("X-Big", String(repeating: "a", count: 4096))])
            #expect(response.status == 431)
            #expect(response.json?["type"] as? String == "urn:portico:problem:request-header-fields-too-large")
            #expect(client.waitForClose())
            try Self.stillServes(gateway)
        }
    }

    @Test("an oversized request target counts toward the head limit")
    func oversizedTarget() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let response = try gateway.connect().request("GET", "/echo/" + String(repeating: "p", count: 3000))
            #expect(response.status == 431)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("too many header fields get 431")
    func tooManyHeaders() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let headers = (0..<30).map { ("X-H\($0)", "v") }
            let response = try gateway.connect().request("GET", "/echo", headers: headers)
            #expect(response.status == 431)
        }
    }

    @Test("an oversized body announced by Content-Length gets 413 before it is read")
    func oversizedBodyByLength() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 413)
            #expect(response.json?["maxBodyBytes"] as? String == "1000")
            #expect(client.waitForClose())
            #expect(servers[0].requestsReceived == 0)
            try Self.stillServes(gateway)
        }
    }

    @Test("an oversized chunked body gets 413 once it passes the limit")
    func oversizedChunkedBody() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            let chunk = String(repeating: "z", count: 600)
            try client.send(
                "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 413)
            #expect(servers[0].requestsReceived == 0)
            try Self.stillServes(gateway)
        }
    }

    @Test("a body at the limit is forwarded")
    func bodyAtLimit() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let body = String(repeating: "b", count: 1000)
            let response = try gateway.connect().request("POST", "/echo", body: body)
            #expect(response.status == 200)
            #expect(response.json?["body"] as? String == body)
        }
    }

    @Test("a client that stops mid-head gets 408 and is disconnected")
    func stopsMidHead() async throws {
        // (When: exactly at the head deadline, checked on a virtual clock by ConnectionTimeoutHandlerTests.)
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect(receiveTimeout: 30)
            try client.send("GET /echo HTTP/1.1\r\nHost: t\r\nX-Partial: ")
            let (response, closed) = try await offThePool { (try client.readResponse(), client.waitForClose()) }
            #expect(response.status == 408)
            #expect(response.json?["type"] as? String == "urn:portico:problem:request-timeout")
            #expect(closed)
            #expect(servers[0].requestsReceived == 0)
            try Self.stillServes(gateway)
        }
    }

    @Test("a client that dribbles a whole head, each byte well within the head timeout, is cut off before its last byte")
    func slowloris() async throws {
        // 25 ms between bytes, 16 times less than the 400 ms head timeout: a deadline that each byte
        // pushed back would never expire, and the whole head would be sent and answered. The
        // deadline runs from the first byte, so the gateway answers 408 and closes while bytes are
        // still to come, however slowly this machine runs the loop.
        let head = Array("GET /echo HTTP/1.1\r\nHost: t\r\nX-Slow: \(String(repeating: "a", count: 120))\r\n\r\n".utf8)
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect(receiveTimeout: 30)
            let sent = try await offThePool { () -> Int in
                for (index, byte) in head.enumerated() {
                    // Stop as soon as the gateway has said something (its 408) or closed.
                    if client.hasInput() { return index }
                    do { try client.send([byte]) } catch { return index }
                    usleep(25_000)
                }
                return head.count
            }
            #expect(sent < head.count, "the whole head was sent: the deadline moved with each byte")
            let answer = try? await offThePool { try client.readResponse() }
            // A reset can overtake the 408 when a byte crossed the close; a 200 never may.
            #expect(answer == nil || answer?.status == 408, "\(answer?.status ?? 0)")
            let closed = try await offThePool { client.waitForClose() }
            #expect(closed)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("a client that stops mid-body gets 408")
    func stopsMidBody() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect(receiveTimeout: 30)
            try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly-part")
            let response = try await offThePool { try client.readResponse() }
            #expect(response.status == 408)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("an idle keep-alive connection is closed by the gateway")
    func idleTimeout() async throws {
        // (When: neither early nor late, checked on a virtual clock by ConnectionTimeoutHandlerTests.
        // The request goes out as soon as the connection is open, well within the idle timeout.)
        try await withGateway(policy: { Self.policy($0, idleTimeout: "2s") }) { gateway, _ in
            let client = try gateway.connect(receiveTimeout: 30)
            #expect(try client.request("GET", "/echo").status == 200)
            let closed2 = try await offThePool { client.waitForClose() }
            #expect(closed2)
            #expect(await eventually { gateway.gateway.openConnections == 0 })
        }
    }

    @Test("unknown paths and versions get 404 problems")
    func unknownRoutes() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            let missing = try client.request("GET", "/nothing-here")
            #expect(missing.status == 404)
            #expect(missing.json?["type"] as? String == "urn:portico:problem:no-route")
            let wrongVersion = try client.request("GET", "/echo?apiVersion=7")
            #expect(wrongVersion.status == 404)
            #expect(wrongVersion.json?["type"] as? String == "urn:portico:problem:unknown-api-version")
            // Prefix matching stops at segment boundaries.
            #expect(try client.request("GET", "/echoes").status == 404)
            #expect(try client.request("GET", "/echo/../secret").status == 400)
        }
    }
}
