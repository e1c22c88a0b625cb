import Foundation
import Logging
import NIOCore
import NIOPosix
import Portico
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport

/// A real gateway on an ephemeral loopback port, with a policy the test writes.
public struct TestGateway: Sendable {
    public let gateway: Gateway
    public let port: Int

    public init(gateway: Gateway, port: Int) {
        self.gateway = gateway
        self.port = port
    }

    /// Starts the gateway. `policy` is YAML with everything but the listener, which is added here.
    /// With a `logger`, the access log is on and goes to it; without, it is off.
    /// With `tls` (a listener `tls` mapping), the listener serves HTTPS.
    /// With a `rateLimiter`, rate limits use it (and its clock). `listener` adds keys to the
    /// listener's mapping (`protocols: [h2c]`).
    public static func start(
        policy: String, logger: Logger? = nil, tls: String? = nil, listener: String? = nil, rateLimiter: RateLimiter = RateLimiter(),
        cacheClock: (@Sendable () -> Double)? = nil
    ) async throws -> TestGateway {
        let snapshot = try Self.snapshot(policy: policy, accessLog: logger != nil, tls: tls, listener: listener)
        var quiet = Logger(label: "portico.test")
        quiet.logLevel = .warning
        let gateway = Gateway(snapshot: snapshot, rateLimiter: rateLimiter, logger: logger ?? quiet, cacheClock: cacheClock)
        try await gateway.start()
        return TestGateway(gateway: gateway, port: gateway.boundPorts["test"]!)
    }

    /// The policy the gateway would load from `policy` plus its test listener.
    public static func snapshot(
        policy: String, accessLog: Bool = false, tls: String? = nil, listener: String? = nil
    ) throws
        -> PolicySnapshot
    {
        let text = """
            \(gatewaySection(accessLog: accessLog, tls: tls, listener: listener))
            \(policy)
            """
        return try PolicyLoader().load(sources: [(file: "test.yaml", text: text)])
    }

    /// The test listener `test` (an ephemeral loopback port, HTTPS with `tls`) and the access log
    /// switch: what every test gateway's policy starts with, loaded from text or from files.
    public static func gatewaySection(accessLog: Bool, tls: String?, listener: String? = nil) -> String {
        """
        listeners:
          - { name: test, address: 127.0.0.1, port: 0\(tls.map { ", tls: \($0)" } ?? "")\(listener.map { ", \($0)" } ?? "") }
        accessLog: { enabled: \(accessLog) }
        """
    }

    /// Installs a new policy for new requests, as a reload does (listeners stay as they are).
    public func reload(policy: String, accessLog: Bool = false) throws {
        gateway.store.replace(with: try Self.snapshot(policy: policy, accessLog: accessLog))
    }

    public func shutdown() async { await gateway.shutdown() }

    /// A fresh raw connection to the gateway.
    public func connect(receiveTimeout: Double = 10, socketOptions: RawHTTPClient.SocketOptions = .init()) throws -> RawHTTPClient {
        try RawHTTPClient(port: port, receiveTimeout: receiveTimeout, socketOptions: socketOptions)
    }
}

/// Policy text for the common case: a backend `echo` on loopback at the first port and a service
/// `echo` at `/echo` that forwards to it unchanged.
public func echoServicePolicy(_ ports: [Int]) -> String {
    """
    backends:
      echo: { url: "http://127.0.0.1:\(ports[0])" }
    services:
      echo:
        path: /echo
        versions:
          1: { proxy: { backend: echo } }
    """
}

/// Runs `body` with backends and a gateway, and always stops them.
public func withGateway(
    backends: [BackendServer.Handler] = [DemoBackends.echo],
    tls: String? = nil,
    listener: String? = nil,
    logger: Logger? = nil,
    rateLimiter: RateLimiter = RateLimiter(),
    cacheClock: (@Sendable () -> Double)? = nil,
    policy: ([Int]) -> String,
    _ body: (TestGateway, [BackendServer]) async throws -> Void
) async throws {
    try await withBackends(
        backends,
        start: { ports in
            try await TestGateway.start(
                policy: policy(ports), logger: logger, tls: tls, listener: listener, rateLimiter: rateLimiter, cacheClock: cacheClock)
        },
        shutdown: { await $0.shutdown() }, body)
}

/// Starts `backends`, then a gateway `start` makes from their ports, runs `body`, and always stops
/// the gateway and then the backends, whichever step failed.
public func withBackends<Started>(
    _ backends: [BackendServer.Handler], start: ([Int]) async throws -> Started, shutdown: (Started) async -> Void,
    _ body: (Started, [BackendServer]) async throws -> Void
) async throws {
    var servers: [BackendServer] = []
    func stopServers() async {
        for server in servers { try? await server.shutdown() }
    }
    do {
        for handler in backends { servers.append(try await BackendServer.start(handler: handler)) }
    } catch {
        await stopServers()
        throw error
    }
    let started: Started
    do {
        started = try await start(servers.map(\.port))
    } catch {
        await stopServers()
        throw error
    }
    do {
        try await body(started, servers)
    } catch {
        await shutdown(started)
        await stopServers()
        throw error
    }
    await shutdown(started)
    await stopServers()
}

/// Keeps every log record, for tests that read the access log.
public final class RecordingLogHandler: LogHandler, @unchecked Sendable {
    public struct Record: Sendable {
        public let level: Logger.Level
        public let message: String
        public let metadata: Logger.Metadata
    }

    private let lock = NSLock()
    private var storage: [Record] = []
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init() {}

    public var records: [Record] { lock.withLock { storage } }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = self.metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let record = Record(level: event.level, message: event.message.description, metadata: merged)
        lock.withLock { storage.append(record) }
    }
}

/// Runs blocking work (socket reads, waits for threads) on a thread of its own.
///
/// Swift's cooperative pool has as many threads as cores, two here. A test that blocks one of them
/// for seconds, while other tests block the other, starves every task in the process, the
/// gateway's own shutdown task among them: blocking waits that last belong here.
///
/// Bind its result to a name, then `#expect` on the name; never call it inside `#expect(...)`.
/// Swift 6.3.1 gave a closure written inside the macro and a later closure of the same shape in
/// the same function one symbol, and ran the first in place of the second: a test read one value
/// and checked another (the compiler only noticed, "function type mismatch", once the two
/// closures' captures differed).
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
