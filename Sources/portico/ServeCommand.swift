import ArgumentParser
import Foundation
import Logging
import Portico
import PorticoDemoBackends
import PorticoPolicy
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `portico serve`: runs the gateway under swift-service-lifecycle until SIGINT or SIGTERM, which
/// drain it gracefully; SIGHUP reloads the policy (the same path as `POST /admin/reload`).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the gateway.")

    @Option(name: .long, help: "The policy directory.")
    var policies: String = "policies"

    @Flag(
        name: .long,
        help: "Also start the demo backends the shipped policy points at (quotes, echo and the facades' feeds, on 18081-18087).")
    var demoBackends = false

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(name: .long, help: "Where access-log lines go: a file (appended to), or - for standard output.")
    var accessLog: String = "-"

    @Option(name: .long, help: "Seconds requests in flight may take to finish after SIGTERM/SIGINT before they are cut.")
    var drainTimeout: Double = 10

    @Option(
        name: .long,
        help: "Look at the policy files every this many seconds and reload when they changed (0, the default: never; use SIGHUP).")
    var watchPolicies: Double = 0

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        // Operational messages on standard error; standard output carries the access log's lines,
        // written in batches by their own writer, so the two never interleave mid-line.
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        signal(SIGPIPE, SIG_IGN)
        // Every signal the process acts on is trapped before a listener is bound: once `serving`
        // is printed, a SIGTERM must drain and a SIGHUP reload, never take the default action
        // (ending the process). One that arrives during start-up waits in its sequence and is
        // acted on as soon as the service runs.
        let shutdownSignals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let hangUps = await UnixSignalsSequence(trapping: .sighup)
        let logger = Logger(label: "portico")
        raiseOpenFileLimit(logger: logger)

        let snapshot: PolicySnapshot
        let contentHash: String
        do {
            let sources = try PolicyLoader().readSources(directory: policies)
            snapshot = try PolicyLoader().load(sources: sources)
            contentHash = PolicyContentHash.of(sources)
        } catch {
            for diagnostic in error.diagnostics { logger.critical("policy error: \(diagnostic)") }
            throw ExitCode(1)
        }
        for warning in snapshot.warnings { logger.warning("policy warning: \(warning)") }

        let output: Int32
        if accessLog == "-" {
            output = STDOUT_FILENO
        } else {
            output = open(accessLog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
            guard output >= 0 else {
                logger.critical("cannot open the access log \(accessLog): \(String(cString: strerror(errno)))")
                throw ExitCode(1)
            }
        }
        let writer = AccessLogWriter(format: snapshot.policy.accessLog.format, output: output)

        var backends: [BackendServer] = []
        if demoBackends {
            backends = try await DemoBackends.start()
            logger.info("demo backends running", metadata: ["ports": "\(backends.map(\.port))"])
        }
        let gateway = Gateway(snapshot: snapshot, accessLogWriter: writer, contentHash: contentHash, logger: logger)
        let reloader = PolicyReloader(gateway: gateway, directory: policies, logger: logger)
        let admin: AdminServer?
        do {
            try await gateway.start()
            if let policy = snapshot.policy.admin {
                admin = try await AdminServer.start(policy, gateway: gateway, reloader: reloader, logger: logger)
            } else {
                admin = nil
            }
        } catch let error as PolicyError {
            for diagnostic in error.diagnostics { logger.critical("policy error: \(diagnostic)") }
            await gateway.shutdown(gracePeriod: .zero)
            for backend in backends { try? await backend.shutdown() }
            throw ExitCode(1)
        } catch {
            logger.critical("cannot start: \(error)")
            await gateway.shutdown(gracePeriod: .zero)
            for backend in backends { try? await backend.shutdown() }
            throw ExitCode(1)
        }
        for (name, port) in gateway.boundPorts.sorted(by: { $0.key < $1.key }) {
            logger.notice("serving", metadata: ["listener": .string(name), "port": .stringConvertible(port)])
        }
        if let admin { logger.notice("admin", metadata: ["port": .stringConvertible(admin.port)]) }

        let service = GatewayService(
            gateway: gateway, admin: admin, reloader: reloader, accessLogWriter: writer,
            drainTimeout: .milliseconds(Int64(drainTimeout * 1000)), hangUps: hangUps,
            watchInterval: watchPolicies > 0 ? .milliseconds(Int64(watchPolicies * 1000)) : nil, logger: logger)
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [service], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                for await signal in shutdownSignals {
                    logger.notice("received \(signal): shutting down")
                    await group.triggerGracefulShutdown()
                }
            }
            try await group.run()
            tasks.cancelAll()
        }
        for backend in backends { try? await backend.shutdown() }
    }
}

/// Every client connection and every pooled backend connection is a file descriptor; a gateway
/// that keeps the common default soft limit (1024) refuses connections long before it runs out of
/// anything else. The soft limit is raised to the hard limit the operator allows.
private func raiseOpenFileLimit(logger: Logger) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    let previous = limit.rlim_cur
    limit.rlim_cur = limit.rlim_max
    if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
        logger.debug("raised the open-file limit", metadata: ["from": "\(previous)", "to": "\(limit.rlim_max)"])
    } else {
        logger.warning("could not raise the open-file limit", metadata: ["limit": "\(previous)"])
    }
}
