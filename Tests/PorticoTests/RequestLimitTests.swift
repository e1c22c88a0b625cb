import Foundation
import PorticoDemoBackends
import Testing

@Suite("Bad and oversized requests")
struct RequestLimitTests {
    static func policy(_ ports: [Int]) -> String {
        "limits: { maxBodyBytes: 1000, maxHeadBytes: 2048, maxHeaderCount: 20, headTimeout: 400ms, idleTimeout: 600ms }\n"
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

    @Test("a client that stops mid-head gets 408 after the head timeout and is disconnected")
    func stopsMidHead() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect(receiveTimeout: 5)
            try client.send("GET /echo HTTP/1.1\r\nHost: t\r\nX-Partial: ")
            let started = ContinuousClock.now
            let response = try client.readResponse()
            #expect(response.status == 408)
            #expect(response.json?["type"] as? String == "urn:portico:problem:request-timeout")
            #expect(client.waitForClose())
            #expect(ContinuousClock.now - started < .seconds(3))
            try Self.stillServes(gateway)
        }
    }

    @Test("a client that dribbles its head byte by byte is cut off at the head deadline")
    func slowloris() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect(receiveTimeout: 5)
            let started = ContinuousClock.now
            var cutOff = false
            for byte in "GET /echo HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaa".utf8 {
                do { try client.send([byte]) } catch { cutOff = true; break }
                try await Task.sleep(for: .milliseconds(100))
                if ContinuousClock.now - started > .seconds(2) { break }
            }
            #expect(cutOff || client.waitForClose())
            // Sending the whole head would take 6.6 s; being cut off well before shows the deadline
            // ran from the first byte. (Generous: other tests load the machine at the same time.)
            #expect(ContinuousClock.now - started < .seconds(6))
        }
    }

    @Test("a client that stops mid-body gets 408")
    func stopsMidBody() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect(receiveTimeout: 5)
            try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly-part")
            let response = try client.readResponse()
            #expect(response.status == 408)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("an idle keep-alive connection is closed after the idle timeout")
    func idleTimeout() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect(receiveTimeout: 5)
            #expect(try client.request("GET", "/echo").status == 200)
            let started = ContinuousClock.now
            #expect(client.waitForClose())
            let waited = ContinuousClock.now - started
            // The idle deadline (600 ms) is longer than the timer's wake-up step (400 ms, the head timeout):
            // the first wake-up must sleep again rather than close early.
            #expect(waited >= .milliseconds(550) && waited < .seconds(3))
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
