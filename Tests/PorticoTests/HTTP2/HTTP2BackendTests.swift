import Foundation
import NIOCore
import NIOPosix
import PorticoTLS
import PorticoTestSupport
import PorticoTesting
import Testing

/// Backends that speak HTTP/2 (`protocol: h2c | h2`), through the gateway's HTTP/2 client.
@Suite(.timeLimit(.minutes(2)))
struct HTTP2BackendTests {
    static func policy(_ url: String, protocol name: String, extra: String = "") -> String {
        """
        backends:
          api: { url: "\(url)", protocol: \(name)\(extra) }
        services:
          api: { path: /api, versions: { 1: { proxy: { backend: api } } } }
        """
    }

    /// `count` GETs (or POSTs) at once, on as many HTTP/1.1 connections, each answer's status and body.
    static func concurrentGETs(_ gateway: TestGateway, count: Int, post: Bool = false) async throws -> [(Int, String)] {
        let port = gateway.port
        return try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for index in 0..<count {
                group.addTask {
                    try await offThePool {
                        let client = try RawHTTPClient(port: port)
                        try client.send(
                            post
                                ? "POST /api/\(index) HTTP/1.1\r\nHost: gateway.test\r\nContent-Length: 4\r\n\r\nbody"
                                : "GET /api/\(index) HTTP/1.1\r\nHost: gateway.test\r\n\r\n")
                        let response = try client.readResponse()
                        return (response.status, response.bodyText)
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test("h2c: requests are streams of one connection per event loop, never more at once than the backend allows")
    func multiplexed() async throws {
        let backend = try await HTTP2Backend.start(maxConcurrentStreams: 3, answerDelay: .milliseconds(50))
        let gateway = try await TestGateway.start(policy: Self.policy("http://127.0.0.1:\(backend.port)", protocol: "h2c"))
        let answers = try await Self.concurrentGETs(gateway, count: 24)
        #expect(answers.allSatisfy { $0.0 == 200 })
        #expect(Set(answers.map { $0.1.split(separator: " ")[1] }) == Set((0..<24).map { "/api/\($0)" }))
        // One connection per event loop of the gateway at most (two cores here; never one per request).
        #expect(backend.connectionsAccepted <= System.coreCount)
        #expect(backend.mostStreamsOpenAtOnce <= 3 * backend.connectionsAccepted)
        await gateway.shutdown()
        try await backend.shutdown()
    }

    @Test("GOAWAY: requests the backend did not process are sent again on a new connection, POSTs included")
    func goAway() async throws {
        // Every 5 requests, a GOAWAY: 20 requests, even all on one event loop's connection, are re-sent
        // at most 3 times each (20 → 15 → 10 → 5), within the client's bound on re-sends.
        let backend = try await HTTP2Backend.start(goAwayAfter: 5, answerDelay: .milliseconds(20))
        let gateway = try await TestGateway.start(policy: Self.policy("http://127.0.0.1:\(backend.port)", protocol: "h2c"))
        let answers = try await Self.concurrentGETs(gateway, count: 20, post: true)
        #expect(answers.allSatisfy { $0.0 == 200 }, "\(answers.filter { $0.0 != 200 })")
        #expect(backend.connectionsAccepted > 1)
        // Each POST processed once: the refused ones went again, none twice.
        #expect(backend.requestsAnswered == 20)
        await gateway.shutdown()
        try await backend.shutdown()
    }

    @Test("a backend connection with no stream open for upstream.idleConnectionTimeout is closed; the next request opens another")
    func idleConnectionClosed() async throws {
        let backend = try await HTTP2Backend.start()
        let policy = Self.policy("http://127.0.0.1:\(backend.port)", protocol: "h2c") + "\nupstream: { idleConnectionTimeout: 200ms }"
        try await withGateway(backends: [], policy: { _ in policy }) { gateway, _ in
            let first = try await Self.concurrentGETs(gateway, count: 1)
            #expect(first.map(\.0) == [200])
            #expect(await eventually { backend.connectionsClosed == 1 })
            let second = try await Self.concurrentGETs(gateway, count: 1)
            #expect(second.map(\.0) == [200])
            #expect(backend.connectionsAccepted == 2)
        }
        try await backend.shutdown()
    }

    @Test("a backend that does not speak HTTP/2 (an HTTP/1.1 server), or says nothing at all: 502, and the next request tries anew")
    func notHTTP2() async throws {
        try await withGateway(policy: { Self.policy("http://127.0.0.1:\($0[0])", protocol: "h2c") }) { gateway, _ in
            let answers = try await Self.concurrentGETs(gateway, count: 2)
            #expect(answers.map(\.0) == [502, 502])
        }
        // Accepts, reads and never writes: no SETTINGS within the connect timeout.
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        let policy = Self.policy("http://127.0.0.1:\(silent.localAddress!.port!)", protocol: "h2c", extra: ", connectTimeout: 200ms")
        try await withGateway(backends: [], policy: { _ in policy }) { gateway, _ in
            for _ in 0..<2 {
                let answers = try await Self.concurrentGETs(gateway, count: 1)
                #expect(answers.map(\.0) == [502], "\(answers)")
            }
        }
        try await silent.close()
    }

    /// An `h2` backend: TLS on the test certificate for `localhost`, ALPN offering `h2` only.
    static func tlsBackend() async throws -> HTTP2Backend {
        var configuration = TLSConfiguration(
            certificates: [
                .init(certificateChain: TestCertificates.path("localhost.pem"), privateKey: TestCertificates.path("localhost-key.pem"))
            ])
        configuration.applicationProtocols = [.h2]
        return try await HTTP2Backend.start(tls: try TLSContext(configuration: configuration))
    }

    @Test("h2: HTTP/2 over TLS with ALPN, the backend's certificate checked against the policy's caFile")
    func overTLS() async throws {
        let backend = try await Self.tlsBackend()
        let policy = Self.policy(
            "https://localhost:\(backend.port)", protocol: "h2", extra: ", caFile: \"\(TestCertificates.path("ca.pem"))\"")
        try await withGateway(backends: [], listener: "protocols: [h2c, http/1.1]", policy: { _ in policy }) { gateway, _ in
            let answers = try await Self.concurrentGETs(gateway, count: 4)
            #expect(answers.allSatisfy { $0.0 == 200 && $0.1.hasPrefix("h2 /api/") })
            // HTTP/2 on both sides.
            let url = "http://127.0.0.1:\(gateway.port)/api/both"
            let h2 = try await offThePool { try HTTP2ExchangeTests.curl(["--http2-prior-knowledge"], url) }
            #expect(h2.httpVersion == "2")
            #expect(h2.body.hasPrefix("h2 /api/both"))
        }
        try await backend.shutdown()
    }

    @Test("h2 with a certificate the caFile does not vouch for: 502, never an answer from it")
    func untrustedBackend() async throws {
        let backend = try await Self.tlsBackend()
        let policy = Self.policy(
            "https://localhost:\(backend.port)", protocol: "h2", extra: ", caFile: \"\(TestCertificates.path("foreign-ca.pem"))\"")
        try await withGateway(backends: [], policy: { _ in policy }) { gateway, _ in
            let answers = try await Self.concurrentGETs(gateway, count: 1)
            #expect(answers[0].0 == 502)
            #expect(backend.requestsAnswered == 0)
        }
        try await backend.shutdown()
    }
}
