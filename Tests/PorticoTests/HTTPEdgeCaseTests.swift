import NIOCore
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

/// RFC 9112 and RFC 9110 rules a client can break, and answers given before a body was read.
@Suite("HTTP edge cases")
struct HTTPEdgeCaseTests {
    /// Timeouts far longer than any step of these tests takes on a loaded machine: draining races
    /// nothing here.
    static func policy(_ ports: [Int]) -> String {
        "limits: { maxBodyBytes: 1048576, headTimeout: 30s, idleTimeout: 30s }\n" + echoServicePolicy(ports)
    }

    // MARK: Host

    @Test(
        "an HTTP/1.1 request without Host, with two, or with a malformed one gets 400 and reaches no backend",
        arguments: [
            "GET /echo HTTP/1.1\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: a.test\r\nhost: a.test\r\n\r\n",
            "GET /echo HTTP/1.0\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: a test\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: a.test/x\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x:abc\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x:80a\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x:65536\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x:+80\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: x:8:8\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: [::1]x\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: [::1]:a\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: [::1\r\n\r\n",
            "GET /echo HTTP/1.1\r\nHost: a[b]\r\n\r\n",
        ])
    func badHost(request: String) async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            try client.send(request)
            let response = try client.readResponse()
            #expect(response.status == 400)
            #expect(response.json?["type"] as? String == "urn:portico:problem:bad-request")
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("an HTTP/1.0 request without Host, and one with an empty Host or a port, are served")
    func acceptableHost() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            try client.send("GET /echo HTTP/1.0\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            #expect(try gateway.connect().request("GET", "/echo", headers: []).status == 200)
            let empty = try gateway.connect()
            try empty.send("GET /echo HTTP/1.1\r\nHost:\r\n\r\n")
            #expect(try empty.readResponse().status == 200)
            let ipv6 = try gateway.connect()
            try ipv6.send("GET /echo HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n")
            #expect(try ipv6.readResponse().status == 200)
            for host in ["x:65535", "x:", "x:0", "[::1]", "192.0.2.1:8080"] {
                let client = try gateway.connect()
                try client.send("GET /echo HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                #expect(try client.readResponse().status == 200, "\(host)")
            }
            #expect(servers[0].requestsReceived >= 9)
        }
    }

    @Test("an HTTP/1.0 request with a chunked body is answered, then the connection closes (RFC 9112 §6.1)")
    func chunkedHTTP10Closes() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            try client.send(
                "POST /echo HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.header("connection")?.lowercased() == "close")
            #expect(client.waitForClose())
            // The same request framed by Content-Length keeps its connection, as the client asked.
            let kept = try gateway.connect()
            try kept.send("POST /echo HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello")
            #expect(try kept.readResponse().status == 200)
            #expect(try kept.request("GET", "/echo").status == 200)
            #expect(servers[0].requestsReceived == 3)
        }
    }

    @Test("an h2c Upgrade offer (java.net.http's default) is answered in HTTP/1.1 and the connection closes; the next connection is served")
    func upgradeOfferIgnoredAndClosed() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            try client.send(
                "GET /echo HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
            )
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.header("upgrade") == nil)
            #expect(response.header("connection")?.lowercased() == "close")
            #expect(client.waitForClose())
            // An Upgrade field without the connection option is no offer: the connection stays.
            let kept = try gateway.connect()
            try kept.send("GET /echo HTTP/1.1\r\nHost: t\r\nUpgrade: h2c\r\n\r\n")
            #expect(try kept.readResponse().status == 200)
            #expect(try kept.request("GET", "/echo").status == 200)
            #expect(servers[0].requestsReceived == 3)
        }
    }

    // MARK: 100 Continue

    @Test("an HTTP/1.0 client that sends Expect: 100-continue never gets an interim 100")
    func noContinueForHTTP10() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("POST /echo HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.json?["body"] as? String == "hello")
        }
    }

    // MARK: Answers given before the body was read

    @Test("after an early answer, a small announced body is drained and the connection serves the next request")
    func smallBodyDrained() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            let body = String(repeating: "d", count: 4000)
            try client.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.utf8.count)\r\n\r\n")
            let answer = try client.readResponse()
            #expect(answer.status == 404)
            #expect(answer.header("connection") == nil)
            try client.send(body)
            let next = try client.request("GET", "/echo/after")
            #expect(next.status == 200)
            #expect(next.json?["path"] as? String == "/echo/after")
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test("a small chunked body is drained too")
    func smallChunkedBodyDrained() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            #expect(try client.readResponse().status == 404)
            try client.send("400\r\n" + String(repeating: "c", count: 1024) + "\r\n0\r\n\r\n")
            #expect(try client.request("GET", "/echo").status == 200)
        }
    }

    @Test("a body over 64 KiB announced after an early answer is not read: Connection: close, then close")
    func largeBodyNotRead() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nContent-Length: \(RequestFraming.maxDrainBytes + 1)\r\n\r\n")
            let answer = try client.readResponse()
            #expect(answer.status == 404)
            #expect(answer.header("connection") == "close")
            #expect(client.waitForClose())
        }
    }

    @Test("a chunked body that grows past 64 KiB after an early answer makes the gateway close")
    func largeChunkedBodyCut() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            #expect(try client.readResponse().status == 404)
            let chunk = "4000\r\n" + String(repeating: "c", count: 0x4000) + "\r\n"
            for _ in 0..<8 { try? client.send(chunk) }  // 128 KiB; the gateway may hang up half way
            #expect(client.waitForClose())
        }
    }

    @Test("a client waiting for 100 Continue that is answered early gets Connection: close and no 100")
    func earlyAnswerWhileAwaitingContinue() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            try client.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
            let answer = try client.readResponse()
            #expect(answer.status == 404)
            #expect(answer.header("connection") == "close")
            #expect(client.waitForClose())
        }
    }

    @Test("a drained body that stops arriving closes the connection without a second answer")
    func drainStalls() async throws {
        let policy = { "limits: { headTimeout: 300ms, idleTimeout: 30s }\n" + echoServicePolicy($0) }
        try await withGateway(policy: policy) { gateway, _ in
            let client = try gateway.connect(receiveTimeout: 60)
            try client.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\npart")
            #expect(try client.readResponse().status == 404)
            // The head timeout runs from the answer: the gateway closes, and writes no 408.
            #expect(client.waitForClose())
            #expect(client.unreadBytes == 0)
        }
    }

    @Test("draining is bounded by a deadline that body bytes do not push back")
    func drainDeadline() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(1, now: .uptimeNanoseconds(0))
        _ = machine.requestHeadReceived(expectsBody: true, now: .uptimeNanoseconds(0))
        #expect(machine.drainStarted() == .startTimer(.head))
        #expect(machine.bytesReceived(1, now: .uptimeNanoseconds(0)) == .none)
        #expect(machine.bytesReceived(1, now: .uptimeNanoseconds(0)) == .none)
        #expect(machine.timerFired() == .close)

        var completes = ConnectionTimeoutStateMachine()
        _ = completes.connectionOpened()
        _ = completes.bytesReceived(1, now: .uptimeNanoseconds(0))
        _ = completes.requestHeadReceived(expectsBody: true, now: .uptimeNanoseconds(0))
        _ = completes.drainStarted()
        #expect(completes.requestEndReceived() == .cancelTimer)
        #expect(completes.responseEndSent() == .startTimer(.idle))
    }
}
