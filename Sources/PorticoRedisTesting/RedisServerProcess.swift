import Foundation
import NIOCore
import NIOPosix
import PorticoRedis
import PorticoTLS
import PorticoTestSupport

/// A real `redis-server` (Debian's) on a free loopback port, for tests: no persistence, and run
/// under `timeout` so that it stops by itself even if the test process dies first.
///
/// `stop()` and `start()` may be called again to kill Redis and bring it back on the same port.
///
/// `@unchecked Sendable`: a test hands it to the tasks it starts, but its one mutable field (the
/// process) is changed only by `start()` and `stop()`, which a test calls from its own task, never
/// concurrently with each other or with `pause()`/`resume()`.
public final class RedisServerProcess: @unchecked Sendable {
    public private(set) var port: Int
    /// With TLS, the server listens only with TLS (`--port 0 --tls-port …`), on `port`.
    public let tls: TLSFiles?
    private var process: ChildProcess?
    /// This server's own working directory, by which ``waitUntilReady()`` also tells it from
    /// another test's server that took the port first.
    private var directory: String

    /// The server's certificate and key, and the CA its clients trust (it asks no client certificate).
    public struct TLSFiles: Sendable {
        public var certificate: String
        public var privateKey: String
        public var ca: String

        public init(certificate: String, privateKey: String, ca: String) {
            self.certificate = certificate
            self.privateKey = privateKey
            self.ca = ca
        }
    }
    /// Longest life of one server, whatever happens to the test.
    private static let lifetimeSeconds = 300

    /// Starts a server and waits until it answers; on a port another server took meanwhile, tries
    /// another port (three attempts in all).
    public init(tls: TLSFiles? = nil) throws {
        self.tls = tls
        port = try Self.freePort()
        directory = Self.directory(for: port)
        for attempt in 1...3 {
            do {
                try start()
                return
            } catch RedisServerError.portTaken where attempt < 3 {
                stop()
                try? FileManager.default.removeItem(atPath: directory)
                port = try Self.freePort()
                directory = Self.directory(for: port)
            }
        }
    }

    private static func directory(for port: Int) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("portico-redis-\(port)-\(UUID().uuidString)").path
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-server") }

    public func start() throws {
        // Its own working directory: a replica writes the primary's snapshot there (dump.rdb).
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var arguments = [
            // SIGKILL at the end, not timeout's default SIGTERM: a server left paused (SIGSTOP) by a
            // test process that died would keep a SIGTERM pending, and run for ever.
            "--signal=KILL", String(Self.lifetimeSeconds), "/usr/bin/redis-server", "--dir", directory, "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning", "--enable-debug-command", "local",
        ]
        if let tls {
            arguments += [
                "--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.certificate, "--tls-key-file", tls.privateKey,
                "--tls-ca-cert-file", tls.ca, "--tls-auth-clients", "no",
            ]
        } else {
            arguments += ["--port", String(port)]
        }
        process = try ChildProcess("/usr/bin/timeout", arguments)
        try waitUntilReady()
    }

    /// Kills the server (SIGKILL: no goodbye to its clients) and waits for it to be gone.
    public func stop() {
        guard let process else { return }
        self.process = nil
        // `timeout` and the redis-server it runs share the process group `timeout` leads (it is
        // started in a group of its own): SIGKILL to the group ends both at once.
        process.signalGroup(SIGKILL)
        process.wait()
    }

    /// Freezes the server (SIGSTOP): the kernel still accepts connections on its port and takes
    /// the bytes sent to them, but nothing answers until ``resume()``.
    public func pause() { signalServer("STOP") }

    /// Lets a paused server run again (SIGCONT); it then answers what it was sent meanwhile.
    public func resume() { signalServer("CONT") }

    /// Signals redis-server alone, not the `timeout` above it.
    private func signalServer(_ name: String) {
        guard let process else { return }
        _ = try? ChildProcess.run("/usr/bin/pkill", ["-\(name)", "-P", String(process.pid)])
    }

    /// Makes this server a replica of `primary` (`REPLICAOF`), as a failover leaves a former
    /// primary, and waits (at most thirty seconds) until it has synchronised: from then on writes get
    /// `-READONLY`, not `-LOADING`.
    public func replicate(_ primary: RedisServerProcess) throws {
        _ = try command(["REPLICAOF", "127.0.0.1", String(primary.port)])
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if try command(["INFO", "replication"]).string?.contains("master_link_status:up") == true { return }
            Thread.sleep(forTimeInterval: 0.02)
        }
        throw RedisServerError.notReady(port: port)
    }

    /// Connects until the server answers, for at most ten seconds, and checks that it is this
    /// one: the port was free when chosen, but a parallel test's server may have been given it
    /// before Redis bound it (Redis then exits, and the other server would answer).
    private func waitUntilReady() throws {
        let deadline = Date().addingTimeInterval(10)
        let ownDirectory = URL(fileURLWithPath: directory).lastPathComponent
        while Date() < deadline {
            if let reply = try? command(["CONFIG", "GET", "dir"]) {
                guard let answered = reply.array?.last?.string, answered.hasSuffix(ownDirectory) else {
                    throw RedisServerError.portTaken(port: port)
                }
                return
            }
            guard process?.isRunning == true else { throw RedisServerError.portTaken(port: port) }
            Thread.sleep(forTimeInterval: 0.02)
        }
        throw RedisServerError.notReady(port: port)
    }

    /// Runs one command on a fresh connection (for set-up and inspection, not speed). It waits up
    /// to 10 s: a replica's synchronisation forks the primary, and CI's machine is loaded.
    public func command(_ parts: [String]) throws -> RESPValue {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        var configuration = RedisConfiguration(host: "127.0.0.1", port: port, timeoutNanos: 10_000_000_000)
        if let tls {
            configuration.tls = RedisTLS(context: try TLSClientContext(caFile: tls.ca), serverName: "127.0.0.1")
        }
        let client = RedisClient(group: group, configuration: configuration)
        let loop = group.next()
        defer { try? client.close().wait() }
        return try loop.flatSubmit { client.send(.command(parts), on: loop) }.wait()
    }

    private static func freePort() throws -> Int {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let channel = try ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress?.port ?? 0
        try channel.close().wait()
        return port
    }
}

public enum RedisServerError: Error {
    case notReady(port: Int)
    /// Something else answers on the port, or Redis could not bind it.
    case portTaken(port: Int)
}
