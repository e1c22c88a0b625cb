import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting

@testable import Portico

/// A real gateway started from a policy directory the test writes, with its admin listener and its
/// reloader: what `portico serve` runs, on ephemeral loopback ports.
final class ReloadableGateway: Sendable {
    let directory: String
    let gateway: Gateway
    let admin: AdminServer
    let reloader: PolicyReloader

    /// The public listener's port.
    var port: Int { gateway.boundPorts["test"]! }

    /// Starts from `files` (name → YAML). Unless the files have their own, the listener `test`
    /// (with `tls` when given) and an admin listener on loopback are added, in `gateway.yaml`.
    static func start(
        files: [String: String], tls: String? = nil, admin: String = "{ address: 127.0.0.1, port: 0 }"
    ) async throws
        -> ReloadableGateway
    {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-reload-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var files = files
        if files["gateway.yaml"] == nil {
            files["gateway.yaml"] = """
                \(TestGateway.gatewaySection(accessLog: false, tls: tls))
                admin: \(admin)
                """
        }
        for (name, text) in files { try write(text, to: directory + "/" + name) }
        let sources = try PolicyLoader().readSources(directory: directory)
        let snapshot = try PolicyLoader().load(sources: sources)
        var logger = Logger(label: "portico.test")
        logger.logLevel = .critical
        let gateway = Gateway(snapshot: snapshot, contentHash: PolicyContentHash.of(sources), logger: logger)
        try await gateway.start()
        let reloader = PolicyReloader(gateway: gateway, directory: directory, logger: logger)
        let admin = try await AdminServer.start(snapshot.policy.admin!, gateway: gateway, reloader: reloader, logger: logger)
        return ReloadableGateway(directory: directory, gateway: gateway, admin: admin, reloader: reloader)
    }

    private init(directory: String, gateway: Gateway, admin: AdminServer, reloader: PolicyReloader) {
        self.directory = directory
        self.gateway = gateway
        self.admin = admin
        self.reloader = reloader
    }

    /// Replaces (or adds) one policy file; the gateway sees it at the next reload.
    func write(_ name: String, _ text: String) throws {
        try Self.write(text, to: directory + "/" + name)
    }

    /// Writes through a temporary file and a rename, as an operator's deployment tool should, so
    /// a reload never reads a half-written file.
    private static func write(_ text: String, to path: String) throws {
        let temporary = path + ".tmp"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        _ = rename(temporary, path)
    }

    /// One request to the admin listener, on a connection of its own (run it off the pool).
    /// A request to the admin listener as a local tool sends it (`Host` names the loopback address).
    func adminRequest(
        _ method: String, _ target: String, token: String? = nil, headers: [(String, String)] = [], host: String? = nil
    ) throws -> RawHTTPClient.Response {
        let client = try RawHTTPClient(port: admin.port, receiveTimeout: 30)
        return try client.request(
            method, target, headers: (token.map { [("Authorization", "Bearer \($0)")] } ?? []) + headers,
            host: host ?? "127.0.0.1:\(admin.port)")
    }

    /// The admin answer's body as a JSON object.
    static func json(_ response: RawHTTPClient.Response) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
    }

    func shutdown() async {
        await gateway.shutdown()
        await admin.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `body` with a reloadable gateway and backends, and always stops them.
func withReloadableGateway(
    backends: [BackendServer.Handler] = [DemoBackends.echo], tls: String? = nil, admin: String = "{ address: 127.0.0.1, port: 0 }",
    files: ([Int]) -> [String: String], _ body: (ReloadableGateway, [BackendServer]) async throws -> Void
) async throws {
    try await withBackends(
        backends, start: { ports in try await ReloadableGateway.start(files: files(ports), tls: tls, admin: admin) },
        shutdown: { await $0.shutdown() }, body)
}

/// A backend that answers every request with `200` and `name` as its body.
func namedBackend(_ name: String) -> BackendServer.Handler {
    { _ in .full(status: .ok, headers: ["Content-Type": "text/plain"], body: .init(string: name)) }
}
