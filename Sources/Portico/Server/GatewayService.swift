import Logging
import ServiceLifecycle
import UnixSignals

/// The running gateway as a swift-service-lifecycle `Service`: it serves until the service group
/// asks for a graceful shutdown (`portico serve` maps SIGTERM and SIGINT to one), reloading the
/// policy on every signal of `hangUps` (SIGHUP) meanwhile, then drains.
///
/// The caller should register `hangUps` before the gateway starts (as `portico serve` does): a
/// signal sequence registered only once the service runs, what happens when none is given, leaves
/// a window after the listeners are up in which a SIGHUP takes its default action.
///
/// The shutdown, in order:
/// 1. the public listeners close: new connections are refused;
/// 2. `/readyz` answers 503 (the admin listener stays up until the end);
/// 3. idle keep-alive connections close; a response in flight carries `Connection: close`;
/// 4. requests in flight finish, for up to ``drainTimeout``; what is left is then closed;
/// 5. the upstream clients stop, the admin listener closes, the access log is flushed, and
///    `run()` returns, so the process exits 0.
///
/// The gateway and its admin listener are started before the service runs, so that a listener that
/// cannot be bound stops start-up with a message rather than inside the service group.
public struct GatewayService: Service {
    public let gateway: Gateway
    public let admin: AdminServer?
    public let reloader: PolicyReloader?
    public let accessLogWriter: AccessLogWriter?
    public let drainTimeout: Duration
    /// The signals that reload the policy, registered before the gateway started; nil: SIGHUP,
    /// registered when the service runs.
    private let hangUps: UnixSignalsSequence?
    /// How often the policy directory is looked at for changes; nil (the default) never.
    public let watchInterval: Duration?
    private let logger: Logger

    public init(
        gateway: Gateway, admin: AdminServer?, reloader: PolicyReloader?, accessLogWriter: AccessLogWriter?,
        drainTimeout: Duration, hangUps: UnixSignalsSequence? = nil, watchInterval: Duration? = nil, logger: Logger
    ) {
        self.hangUps = hangUps
        self.watchInterval = watchInterval
        self.gateway = gateway
        self.admin = admin
        self.reloader = reloader
        self.accessLogWriter = accessLogWriter
        self.drainTimeout = drainTimeout
        self.logger = logger
    }

    public func run() async throws {
        let hangUps: UnixSignalsSequence
        if let given = self.hangUps { hangUps = given } else { hangUps = await UnixSignalsSequence(trapping: .sighup) }
        await withTaskGroup(of: Void.self) { group in
            if let reloader {
                group.addTask {
                    // The same path as POST /admin/reload; the reloader logs what it did.
                    for await _ in hangUps { _ = await reloader.reload() }
                }
                if let watchInterval {
                    group.addTask {
                        // Polling the files' hash: portable, and cheap at a few small files per look.
                        while (try? await Task.sleep(for: watchInterval)) != nil {
                            _ = await reloader.reloadIfChanged()
                        }
                    }
                }
            }
            // Returns when the group shuts down gracefully (or throws when it is cancelled).
            try? await gracefulShutdown()
            group.cancelAll()
        }
        logger.notice("shutting down: draining", metadata: ["drainTimeout": "\(drainTimeout)"])
        await gateway.shutdown(gracePeriod: drainTimeout)
        await admin?.shutdown()
        if let accessLogWriter, !accessLogWriter.shutdown() {
            logger.error("the access log's output did not take its last lines in time; they are lost")
        }
        logger.notice("stopped")
    }
}
