import Foundation
import NIOHTTP1
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// Clients that stop reading their answers, through the running gateway.
///
/// The read timeouts, the backend timeout and the send timeouts of these policies are far apart:
/// only the behaviour under test can end the connection within the tests' guards, so the tests
/// assert what happened (a close, the connection gone), never how long it took.
@Suite("Clients that stop reading")
struct SlowReaderTests {
    /// A client whose receive window is tiny and who never reads.
    static let stalling = RawHTTPClient.SocketOptions(receiveBufferSize: 4096, sendTimeout: 60)

    @Test("a client that sends large pipelined requests and never reads is closed by the send timeout")
    func pipelinedNeverRead() async throws {
        let policy: ([Int]) -> String = { ports in
            """
            limits: { headTimeout: 120s, idleTimeout: 120s, sendTimeout: 300ms }
            backends:
              echo: { url: "http://127.0.0.1:\(ports[0])", timeout: 120s }
            services:
              echo: { path: /echo, versions: { 1: { proxy: { backend: echo } } } }
            """
        }
        try await withGateway(policy: policy) { gateway, servers in
            let client = try gateway.connect(receiveTimeout: 60, socketOptions: Self.stalling)
            let body = String(repeating: "x", count: 512 * 1024)
            let request = "POST /echo/big HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
            // 12 MiB of requests, more than every buffer between the two can hold: sending blocks once
            // the gateway stops reading, and fails once it closes.
            let sending = Task {
                try await offThePool {
                    for _ in 0..<24 { try? client.send(request) }
                }
            }
            #expect(await eventually { servers[0].requestsReceived > 0 })
            #expect(await eventually { gateway.gateway.openConnections == 0 }, "the stalled connection is still open")
            try await sending.value
            let closed = try await offThePool { client.waitForClose() }
            #expect(closed)  // what was in flight, then EOF or reset
            #expect(try gateway.connect().request("GET", "/echo/after").status == 200)
        }
    }

    /// A TLS client with a tiny window that asked for an answer that never ends (a backend
    /// streaming 1 GiB), and reads none of it. `limits` and `backendTimeout` are the policy's.
    static func stalledTLSClient(
        limits: String, backendTimeout: String
    ) async throws -> (backend: BackendServer, gateway: TestGateway, client: TLSTestClient) {
        let huge: BackendServer.Handler = { _ in .stream(status: .ok, headers: HTTPHeaders(), totalBytes: 1 << 30) }
        let backend = try await BackendServer.start(handler: huge)
        let policy = """
            limits: \(limits)
            backends:
              huge: { url: "http://127.0.0.1:\(backend.port)", timeout: \(backendTimeout) }
            services:
              huge: { path: /huge, versions: { 1: { proxy: { backend: huge } } } }
            """
        let gateway = try await TestGateway.start(policy: policy, tls: TLSTests.localhost)
        var options = TLSTestClient.Options()
        options.socket = Self.stalling
        let client = try TLSTestClient(port: gateway.port, options: options)
        try client.send("GET /huge HTTP/1.1\r\nHost: localhost\r\n\r\n")
        return (backend, gateway, client)
    }

    @Test("a TLS client that stops reading a long answer is closed by the send timeout")
    func tlsNeverRead() async throws {
        // Nothing else ends it within the wait: the backend streams for ever, and every other limit
        // is ten minutes away, far beyond `eventually`'s two.
        let (backend, gateway, client) = try await Self.stalledTLSClient(
            limits: "{ headTimeout: 600s, idleTimeout: 600s, sendTimeout: 300ms }", backendTimeout: "600s")
        #expect(await eventually { backend.streamedBytes > 0 })
        #expect(await eventually { gateway.gateway.openConnections == 0 }, "the stalled TLS connection is still open")
        let closed = try await offThePool { client.waitForClose() }
        #expect(closed)
        await gateway.shutdown()
        try await backend.shutdown()
    }

    @Test("shutdown completes while a TLS client that stopped reading is connected")
    func shutdownWithStalledTLSClient() async throws {
        let (backend, gateway, client) = try await Self.stalledTLSClient(
            limits: "{ idleTimeout: 120s, sendTimeout: 120s }", backendTimeout: "120s")
        // The answer is under way and stuck behind the client's closed window.
        #expect(await eventually { backend.streamedBytes > 1 << 20 })
        #expect(gateway.gateway.openConnections == 1)

        let stopped = await returns(within: .seconds(60)) { await gateway.gateway.shutdown(gracePeriod: .milliseconds(200)) }
        #expect(stopped, "shutdown hung on a connection whose close_notify cannot be written")
        #expect(gateway.gateway.openConnections == 0)
        let closed2 = try await offThePool { client.waitForClose() }
        #expect(closed2)
        try await backend.shutdown()
    }
}
