import Foundation
import Logging
import NIOConcurrencyHelpers
import PorticoPolicy

/// The gateway's tracers, one per `tracing:` policy compiled, and their only owner.
///
/// A compile for a reload that keeps the same `tracing` section gets the running tracer back, so a
/// reload neither drops spans nor opens a second exporter. Only the installed policy's tracer runs:
/// installing a policy starts its tracer and stops (after sending what it queued) any other. A
/// tracer made for a policy that is compiled and never installed (a dry run) never starts.
///
/// **Why the registry owns them and everything else holds them weakly.** swift-otel's OTLP/HTTP
/// exporter shuts its HTTP client down in its `deinit` with a blocking call that traps on a NIO
/// event loop; a compiled policy or an exchange is often let go on one. So compiled policies and
/// exchanges hold a tracer weakly, and the registry lets its tracers go only in ``shutdown()``,
/// from the gateway's asynchronous shutdown (or, if it is dropped without one, on a thread of its own).
final class TracerRegistry: Sendable {
    private let state = NIOLockedValueBox<State>(State())
    private let logger: Logger
    private let onDropped: @Sendable (Int) -> Void

    private struct State {
        /// Every tracer made, until the gateway stops (retired ones too: a few per policy change).
        var all: [GatewayTracer] = []
        var byPolicy: [TracingPolicy: GatewayTracer] = [:]
        var active: GatewayTracer?
        var shutDown = false
    }

    /// - Parameter onDropped: told how many spans a full queue dropped (the gateway's metrics).
    init(logger: Logger = Logger(label: "portico.tracing"), onDropped: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.logger = logger
        self.onDropped = onDropped
    }

    deinit {
        let remaining = state.withLockedValue { $0.all }
        guard !remaining.isEmpty else { return }
        // Let go on a thread that is surely no event loop.
        Thread.detachNewThread { withExtendedLifetime(remaining) {} }
    }

    /// The tracer for `policy`, made if it is new. `nil` if swift-otel refused the configuration
    /// (logged; the policy then serves untraced rather than not at all).
    func tracer(for policy: TracingPolicy) -> GatewayTracer? {
        state.withLockedValue { state in
            if let tracer = state.byPolicy[policy] { return tracer }
            guard !state.shutDown else { return nil }
            do {
                let tracer = try GatewayTracer(policy: policy, logger: logger, onDropped: onDropped)
                state.byPolicy[policy] = tracer
                state.all.append(tracer)
                return tracer
            } catch {
                logger.error("tracing is off: the exporter could not be made", metadata: ["error": "\(error)"])
                return nil
            }
        }
    }

    /// The installed policy's tracer is `tracer` (nil: tracing off): it starts, any other stops.
    func activate(_ tracer: GatewayTracer?) {
        let retired: GatewayTracer? = state.withLockedValue { state in
            guard !state.shutDown else { return nil }
            let previous = state.active
            state.active = tracer
            state.byPolicy = tracer.map { [$0.policy: $0] } ?? [:]
            tracer?.start()
            return previous === tracer ? nil : previous
        }
        if let retired { Task { await retired.shutdown() } }
    }

    /// Stops every tracer after it has sent what it queued, and lets them go.
    func shutdown() async {
        let all = state.withLockedValue { state -> [GatewayTracer] in
            state.shutDown = true
            state.active = nil
            state.byPolicy = [:]
            defer { state.all = [] }
            return state.all
        }
        for tracer in all { await tracer.shutdown() }
    }
}

/// A weak reference to a tracer: what compiled policies and exchanges hold (see ``TracerRegistry``).
struct WeakGatewayTracer: Sendable {
    weak var value: GatewayTracer?
}
