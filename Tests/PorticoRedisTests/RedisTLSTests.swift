import Foundation
import NIOCore
import NIOPosix
import PorticoRedisTesting
import PorticoTLS
import PorticoTestSupport
import Testing

@testable import PorticoRedis

/// `rediss://`: the client's TLS (OpenSSL, client mode) against a real `redis-server` listening
/// with TLS only, on certificates made for this run.
@Suite("Redis over TLS", .enabled(if: RedisServerProcess.isInstalled), .serialized)
struct RedisTLSTests {
    /// The tests' certificates (``TestCertificates``): `ca.pem` signs `localhost.pem` (SAN
    /// localhost and 127.0.0.1); `foreign-ca.pem` is another CA.
    static func path(_ name: String) -> String { TestCertificates.path(name) }

    static func server() throws -> RedisServerProcess {
        try RedisServerProcess(
            tls: .init(certificate: path("localhost.pem"), privateKey: path("localhost-key.pem"), ca: path("ca.pem")))
    }

    private func withClient(
        _ server: RedisServerProcess, ca: String, serverName: String = "127.0.0.1", database: Int = 0,
        _ body: (RedisClient, any EventLoop) throws -> Void
    ) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        var configuration = RedisConfiguration(host: "127.0.0.1", port: server.port, database: database, timeoutNanos: 2_000_000_000)
        configuration.tls = RedisTLS(context: try TLSClientContext(caFile: ca), serverName: serverName)
        let client = RedisClient(group: group, configuration: configuration)
        defer { try? client.close().wait() }
        try body(client, group.next())
    }

    @Test("over TLS, the handshake and pipelined commands work end to end, by IP address and by host name")
    func endToEnd() throws {
        let server = try Self.server()
        for name in ["127.0.0.1", "localhost"] {
            try withClient(server, ca: Self.path("ca.pem"), serverName: name, database: 2) { client, loop in
                let futures = try loop.submit {
                    (0..<50).map { index in
                        client.send(.command(["SET", "k\(index)", "v\(index)"]), on: loop).flatMap { _ in
                            client.send(.command(["GET", "k\(index)"]), on: loop)
                        }
                    }
                }.wait()
                for (index, future) in futures.enumerated() { #expect(try future.wait().string == "v\(index)") }
                // Larger than one TLS record both ways.
                let big = String(repeating: "x", count: 40_000)
                let echoed = try loop.flatSubmit { client.send(.command(["ECHO", big]), on: loop) }.wait()
                #expect(echoed.string == big)
            }
        }
        // The keys went to database 2, through TLS (the inspection connection is TLS too).
        #expect(try server.command(["EVAL", "redis.call('SELECT', 2) return redis.call('DBSIZE')", "0"]) == .integer(50))
    }

    @Test("a server certificate from a CA the client does not trust is refused, saying why")
    func wrongCA() throws {
        let server = try Self.server()
        try withClient(server, ca: Self.path("foreign-ca.pem")) { client, loop in
            do {
                let reply = try loop.flatSubmit { client.send(.command(["ECHO", "secret"]), on: loop) }.wait()
                Issue.record("an untrusted server answered: \(reply)")
            } catch let error as RedisError {
                #expect(error.label == "tls", "\(error)")
                // OpenSSL's reason for the chain (redis-server sends its CA along), and the verdict.
                #expect("\(error)".contains("server certificate: self-signed certificate in certificate chain"), "\(error)")
                #expect("\(error)".contains("certificate verify failed"), "\(error)")
            }
            // The server ran no command of the client's: nothing went past the handshake.
            #expect(try server.command(["INFO", "commandstats"]).string?.contains("cmdstat_echo") == false)
        }
    }

    @Test("a server certificate that does not name the host connected to is refused")
    func wrongName() throws {
        let server = try Self.server()
        try withClient(server, ca: Self.path("ca.pem"), serverName: "redis.example") { client, loop in
            do {
                let reply = try loop.flatSubmit { client.send(.command(["PING"]), on: loop) }.wait()
                Issue.record("a server named otherwise answered: \(reply)")
            } catch let error as RedisError {
                #expect(error.label == "tls", "\(error)")
                #expect("\(error)".contains("hostname mismatch"), "\(error)")
            }
        }
    }

    @Test("a CA file that is missing or not PEM is refused when the context is made")
    func badCAFile() throws {
        #expect(throws: TLSConfigurationError.self) { try TLSClientContext(caFile: "/nonexistent/ca.pem") }
        let notPEM = FileManager.default.temporaryDirectory.appendingPathComponent("portico-not-pem-\(UUID().uuidString)").path
        try "not a certificate\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: notPEM) }
        do {
            _ = try TLSClientContext(caFile: notPEM)
            Issue.record("a file that is not PEM was accepted")
        } catch {
            #expect(error.setting == .trustedCA)
            #expect(error.description.hasPrefix(notPEM + ": not a PEM file"), "\(error)")
        }
    }
}
