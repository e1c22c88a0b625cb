import Foundation
import PorticoTestSupport
import PorticoTesting
import Testing

/// gRPC through the gateway with gRPC's own Python implementation (grpcio, installed by
/// `scripts/interop/setup.sh`) on both sides: a real gRPC server behind an `h2c` backend, a real
/// gRPC client in front of an `h2c` listener.
@Suite("gRPC passes through", .timeLimit(.minutes(2)))
struct GRPCPassThroughTests {
    static let script = InteropTests.repositoryRoot.appendingPathComponent("scripts/interop/grpc-peer.py").path
    static let grpcInstalled = Repository.interopPythonImports("grpc")

    struct Call: Decodable {
        var code: String
        var details: String
        var replies: [String]
    }

    /// A gRPC server in a child process, stopped when its standard input closes.
    static func server() throws -> AnnouncedServer {
        try AnnouncedServer(InteropTests.python!, [script, "server"])
    }

    static func policy(_ grpcPort: Int) -> String {
        """
        backends:
          grpc: { url: "http://127.0.0.1:\(grpcPort)", protocol: h2c, timeout: 3s }
        services:
          echo: { path: /portico.test.Echo, versions: { 1: { proxy: { backend: grpc } } } }
          keyed: { path: /portico.test.Keyed, auth: apiKey, versions: { 1: { proxy: { backend: grpc } } } }
        """
    }

    static func call(_ port: Int, _ method: String, _ payload: String, timeout: Double = 10, metadata: [String] = []) throws -> Call {
        let result = try ChildProcess.run(
            InteropTests.python!, [script, "client", "127.0.0.1:\(port)", method, payload, String(timeout)] + metadata)
        try #require(result.termination == .exited(0), "\(String(decoding: result.errors, as: UTF8.self))")
        return try JSONDecoder().decode(Call.self, from: result.output)
    }

    static func withGRPC(_ body: @escaping @Sendable (_ gatewayPort: Int) throws -> Void) async throws {
        let server = try Self.server()
        defer { server.stop() }
        try #require(server.port > 0)
        let gateway = try await TestGateway.start(policy: policy(server.port), listener: "protocols: [h2c]")
        do {
            let port = gateway.port
            try await offThePool { try body(port) }
        } catch {
            await gateway.shutdown()
            throw error
        }
        await gateway.shutdown()
    }

    @Test("a unary call and a server-streaming call pass through to a real gRPC server", .enabled(if: grpcInstalled))
    func unaryAndStreaming() async throws {
        try await Self.withGRPC { port in
            let unary = try Self.call(port, "Unary", "hello")
            #expect(unary.code == "OK")
            #expect(unary.replies == ["echo:hello"])
            let streamed = try Self.call(port, "Stream", "part")
            #expect(streamed.code == "OK")
            #expect(streamed.replies == (0..<5).map { "part-\($0)" })
        }
    }

    @Test("the backend's status reaches the client in its trailers (grpc-status, grpc-message)", .enabled(if: grpcInstalled))
    func trailers() async throws {
        try await Self.withGRPC { port in
            let failed = try Self.call(port, "Unary", "fail")
            #expect(failed.code == "NOT_FOUND")
            #expect(failed.details == "no such thing")
        }
    }

    @Test("a call's deadline reaches the backend no longer than the backend's timeout", .enabled(if: grpcInstalled))
    func deadline() async throws {
        try await Self.withGRPC { port in
            // 60 s asked for; the backend's timeout is 3 s.
            let clamped = try Self.call(port, "Deadline", "x", timeout: 60)
            #expect(clamped.replies == ["3"])
            let shorter = try Self.call(port, "Deadline", "x", timeout: 1)
            #expect(shorter.replies == ["1"])
        }
    }

    @Test("a gateway refusal reaches a gRPC client as its grpc-status (401 → UNAUTHENTICATED)", .enabled(if: grpcInstalled))
    func refusal() async throws {
        try await Self.withGRPC { port in
            let missing = try Self.call(port, "portico.test.Keyed/Unary", "hi")
            #expect(missing.code == "UNAUTHENTICATED")
            #expect(missing.details == "API key required")
            let unknown = try Self.call(port, "portico.test.Nowhere/Unary", "hi")
            #expect(unknown.code == "UNIMPLEMENTED")
        }
    }
}
