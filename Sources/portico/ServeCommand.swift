import ArgumentParser
import Dispatch
import Foundation
import Logging
import Portico
import PorticoDemoBackends
import PorticoPolicy

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `portico serve`: runs the gateway until SIGINT or SIGTERM; SIGHUP reloads certificates.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the gateway.")

    @Option(name: .long, help: "The policy directory.")
    var policies: String = "policies"

    @Flag(name: .long, help: "Also start the demo backends the shipped policy points at (quotes on 18081, echo on 18082).")
    var demoBackends = false

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardOutput(label: label)
            handler.logLevel = level
            return handler
        }
        signal(SIGPIPE, SIG_IGN)
        let logger = Logger(label: "portico")
        raiseOpenFileLimit(logger: logger)

        let snapshot: PolicySnapshot
        do {
            snapshot = try PolicyLoader().load(directory: policies)
        } catch {
            for diagnostic in error.diagnostics { logger.critical("policy error: \(diagnostic)") }
            throw ExitCode(1)
        }
        for warning in snapshot.warnings { logger.warning("policy warning: \(warning)") }

        var backends: [BackendServer] = []
        if demoBackends {
            backends = try await DemoBackends.start()
            logger.info("demo backends running", metadata: ["ports": "\(backends.map(\.port))"])
        }
        let gateway = Gateway(snapshot: snapshot, logger: logger)
        do {
            try await gateway.start()
        } catch let error as PolicyError {
            for diagnostic in error.diagnostics { logger.critical("policy error: \(diagnostic)") }
            for backend in backends { try? await backend.shutdown() }
            throw ExitCode(1)
        }
        let reloads = reloadCertificatesOnHangUp(gateway, logger: logger)
        defer { reloads.cancel() }
        for (name, port) in gateway.boundPorts.sorted(by: { $0.key < $1.key }) {
            logger.notice("serving", metadata: ["listener": .string(name), "port": .stringConvertible(port)])
        }

        await waitForTerminationSignal()
        logger.notice("shutting down")
        await gateway.shutdown()
        for backend in backends { try? await backend.shutdown() }
    }

    /// SIGHUP reads every TLS listener's certificate files again (after a renewal on disk); a
    /// broken file is logged and the certificates in use stay.
    private func reloadCertificatesOnHangUp(_ gateway: Gateway, logger: Logger) -> any DispatchSourceSignal {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "portico.reload"))
        source.setEventHandler {
            do throws(PolicyError) {
                try gateway.reloadCertificates()
                logger.notice("certificates reloaded")
            } catch {
                for diagnostic in error.diagnostics {
                    logger.error("certificate reload refused, the current certificates stay: \(diagnostic)")
                }
            }
        }
        source.resume()
        return source
    }

    private func waitForTerminationSignal() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let queue = DispatchQueue(label: "portico.signals")
            let once = SignalOnce(continuation)
            for number in [SIGINT, SIGTERM] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { once.fire() }
                source.resume()
                once.keep(source)
            }
        }
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

/// Resumes the waiting task on the first signal only; keeps the signal sources alive meanwhile.
private final class SignalOnce: @unchecked Sendable {
    private var continuation: CheckedContinuation<Void, Never>?
    private var sources: [any DispatchSourceSignal] = []
    private let lock = NSLock()

    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }

    func keep(_ source: any DispatchSourceSignal) { lock.withLock { sources.append(source) } }

    func fire() {
        let continuation = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume()
    }
}
