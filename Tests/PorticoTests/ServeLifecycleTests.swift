import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `portico serve` as a process: what it prints, and how it ends.
final class ServeProcess: Sendable {
    let process: ChildProcess
    private let errors = NIOLockedValueBox("")

    init(arguments: [String]) throws {
        // Under `timeout`, so that a gateway outlives a test process that crashed by two minutes at
        // most; `timeout` passes SIGTERM, SIGINT and SIGHUP on to it and exits with its status.
        // `--foreground`: to the gateway alone; without it `timeout` also signals its process
        // group, which the gateway is in, and the gateway would get every signal twice.
        process = try ChildProcess(
            "/usr/bin/timeout", ["--foreground", "--signal=KILL", "120", try porticoExecutable().path, "serve"] + arguments,
            standardError: .pipe)
        let reader = process.standardError!
        Thread.detachNewThread { [errors] in
            while true {
                let data = reader.availableData
                if data.isEmpty { return }
                errors.withLockedValue { $0 += String(decoding: data, as: UTF8.self) }
            }
        }
    }

    var standardError: String { errors.withLockedValue { $0 } }

    /// The port a `serving`/`admin` log line reported, once it has been printed.
    func port(_ message: String, listener: String? = nil) -> Int? {
        for line in standardError.split(separator: "\n") where line.hasSuffix(" \(message)") {
            if let listener, !line.contains("listener=\(listener)") { continue }
            guard let range = line.range(of: #"port=\d+"#, options: .regularExpression) else { continue }
            return Int(line[range].dropFirst(5))
        }
        return nil
    }

    /// Sends `number` to `timeout`, which passes it on; SIGKILL goes to both (their process group).
    func signal(_ number: Int32) {
        if number == SIGKILL { process.signalGroup(SIGKILL) } else { process.signal(number) }
    }
}

@Suite("portico serve's lifecycle")
struct ServeLifecycleTests {
    @Test("SIGTERM with requests in flight: they complete with Connection: close, new connections are refused, the process exits 0")
    func sigtermDrains() async throws {
        let group = MultiThreadedEventLoopGroup.singleton
        let release = group.next().makePromise(of: Void.self)
        // `/slow/done` answers when the test releases it; `/slow/never` never answers.
        let backend = try await ScriptedBackend.start { request in
            guard request.target.hasSuffix("/done") else { return [] }
            return [.after(release.futureResult), .text("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")]
        }
        defer { release.succeed() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-serve-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
        listeners:
          - { name: public, address: 127.0.0.1, port: 0 }
        admin: { address: 127.0.0.1, port: 0 }
        backends:
          slow: { url: "http://127.0.0.1:\(backend.port)", client: nio, timeout: 120s }
        services:
          slow: { path: /slow, versions: { 1: { proxy: { backend: slow } } } }
        """.write(toFile: directory + "/gateway.yaml", atomically: true, encoding: .utf8)
        let accessLog = directory + "/access.log"

        // The drain must outlast what the test observes during it (readiness, the closed listener,
        // the three answers) on a loaded machine; the fourth request is cut when it ends. (6 s was
        // once too short: a CI run's polling of /readyz first ran after the process had exited.)
        // The backend's timeout is longer than any of it: the answers wait for the test's release,
        // and a loaded run once took over 30 s (the default) to get there.
        let serve = try ServeProcess(arguments: ["--policies", directory, "--access-log", accessLog, "--drain-timeout", "20"])
        defer { if serve.process.isRunning { serve.signal(SIGKILL) } }
        #expect(await eventually { serve.port("serving", listener: "public") != nil && serve.port("admin") != nil })
        let port = try #require(serve.port("serving", listener: "public"))
        let adminPort = try #require(serve.port("admin"))

        // Three requests that will complete, one that never would.
        // Each waits longer than the drain: the fourth's connection closes only when it ends.
        let clients = try (0..<4).map { _ in try RawHTTPClient(port: port, receiveTimeout: 90) }
        for client in clients.prefix(3) { try client.send("GET /slow/done HTTP/1.1\r\nHost: t\r\n\r\n") }
        try clients[3].send("GET /slow/never HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(await eventually { backend.requestsReceived == 4 })

        serve.signal(SIGTERM)
        // Draining: not ready, and the public listener is closed.
        #expect(
            await eventually {
                (try? RawHTTPClient(port: adminPort).request("GET", "/readyz", host: "127.0.0.1").status) == 503
            })
        #expect(await eventually { (try? RawHTTPClient(port: port)) == nil })

        release.succeed()
        let answers = try await offThePool { try clients.prefix(3).map { try $0.readResponse() } }
        for answer in answers {
            #expect(answer.status == 200)
            #expect(answer.bodyText == "done")
            #expect(answer.header("connection") == "close")
        }
        // The request that never completes is cut when the drain timeout ends; then the process exits.
        let closed = try await offThePool { clients[3].waitForClose() }
        #expect(closed)
        let ended = try await offThePool { serve.process.wait() }
        #expect(ended == .exited(0), "\(serve.standardError)")
        #expect(serve.standardError.contains("shutting down: draining"))
        #expect(serve.standardError.contains("stopped"))

        // The access log was flushed at shutdown: one JSON line per exchange, the cut one included.
        let lines = try String(contentsOfFile: accessLog, encoding: .utf8).split(separator: "\n")
        let records = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(records.count == 4)
        #expect(records.filter { $0["path"] as? String == "/slow/done" && $0["status"] as? Int == 200 }.count == 3)
        #expect(records.filter { $0["path"] as? String == "/slow/never" }.count == 1)
        try await backend.shutdown()
    }

    @Test("a SIGTERM sent the moment `serving` is printed drains and exits 0: the signal is trapped before any listener is bound")
    func sigtermRightAfterStart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-early-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
        listeners:
          - { name: public, address: 127.0.0.1, port: 0 }
        backends:
          none: { url: "http://127.0.0.1:9" }
        services:
          none: { path: /none, versions: { 1: { proxy: { backend: none } } } }
        """.write(toFile: directory + "/gateway.yaml", atomically: true, encoding: .utf8)
        let serve = try ServeProcess(arguments: ["--policies", directory, "--access-log", "/dev/null"])
        defer { if serve.process.isRunning { serve.signal(SIGKILL) } }
        // Polled tightly: the earlier the signal, the wider the window it would have found.
        let deadline = ContinuousClock.now + .seconds(30)
        while serve.port("serving", listener: "public") == nil, ContinuousClock.now < deadline { usleep(200) }
        #expect(serve.port("serving", listener: "public") != nil)
        serve.signal(SIGTERM)
        let ended = try await offThePool { serve.process.wait() }
        #expect(ended == .exited(0), "\(serve.standardError)")
        #expect(serve.standardError.contains("stopped"))
    }

    @Test("SIGHUP reloads the policy through the same path as POST /admin/reload; a broken one is refused and logged")
    func hangUpReloads() async throws {
        let backend = try await BackendServer.start(handler: DemoBackends.echo)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-hup-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let policy = { (path: String) in
            """
            listeners:
              - { name: public, address: 127.0.0.1, port: 0 }
            admin: { address: 127.0.0.1, port: 0 }
            backends:
              echo: { url: "http://127.0.0.1:\(backend.port)" }
            services:
              echo: { path: \(path), versions: { 1: { proxy: { backend: echo } } } }
            """
        }
        try policy("/before").write(toFile: directory + "/gateway.yaml", atomically: true, encoding: .utf8)
        let serve = try ServeProcess(arguments: ["--policies", directory, "--access-log", "/dev/null"])
        defer { if serve.process.isRunning { serve.signal(SIGKILL) } }
        #expect(await eventually { serve.port("serving", listener: "public") != nil && serve.port("admin") != nil })
        let port = try #require(serve.port("serving", listener: "public"))
        let adminPort = try #require(serve.port("admin"))
        let client = try RawHTTPClient(port: port)
        #expect(try client.request("GET", "/before/x").status == 200)

        try policy("/after").write(toFile: directory + "/gateway.yaml", atomically: true, encoding: .utf8)
        serve.signal(SIGHUP)
        #expect(await eventually { serve.standardError.contains("policy reloaded") })
        #expect(try client.request("GET", "/after/x").status == 200)
        #expect(try client.request("GET", "/before/x").status == 404)
        let generation = {
            (try? RawHTTPClient(port: adminPort).request("GET", "/readyz", host: "127.0.0.1").json?["generation"] as? String) ?? nil
        }
        #expect(generation() == "1")

        try "services: [".write(toFile: directory + "/gateway.yaml", atomically: true, encoding: .utf8)
        serve.signal(SIGHUP)
        #expect(await eventually { serve.standardError.contains("policy reload refused") })
        #expect(try client.request("GET", "/after/x").status == 200)
        #expect(generation() == "1")

        serve.signal(SIGINT)
        let ended = try await offThePool { serve.process.wait() }
        #expect(ended == .exited(0))
        try await backend.shutdown()
    }
}
