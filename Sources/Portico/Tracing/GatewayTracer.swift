import Logging
import NIOConcurrencyHelpers
import OTel
import PorticoPolicy
import ServiceLifecycle
import Synchronization
import Tracing

/// One `tracing:` policy's tracer and exporter: swift-otel's tracer (ids, the ratio sampler, W3C
/// propagation), its batch span processor and its OTLP/HTTP exporter, made without the
/// process-wide bootstrap, since a process may run several gateways (the tests do) and a reload may
/// point one at another collector.
///
/// Export runs in a task of its own (swift-otel's service group), never on an event loop: a span's
/// end only takes a lock and yields to a stream, so a collector that is down or slow never delays
/// a request. The batch processor holds at most the policy's `queueSize` spans; beyond that it
/// drops them, and ``droppedSpans`` counts them (read from the processor's own report, its only one).
final class GatewayTracer: Sendable {
    let policy: TracingPolicy
    let sampler: TraceSampler
    /// Read by every request: kept apart so that a request copies none of the policy's strings.
    let trust: TracingPolicy.TrustIncoming
    let answersTraceparent: Bool
    let tracer: any Tracer
    /// Spans the batch processor dropped because its queue was full.
    let droppedSpans: SpanDropCounter
    private let group: ServiceGroup
    private let running = NIOLockedValueBox<Task<Void, Never>?>(nil)
    private let logger: Logger

    init(policy: TracingPolicy, logger: Logger, onDropped: @escaping @Sendable (Int) -> Void = { _ in }) throws {
        self.policy = policy
        self.sampler = TraceSampler(policy.sampler)
        self.trust = policy.trustIncoming
        self.answersTraceparent = policy.responseTraceparent
        self.logger = logger
        let dropped = SpanDropCounter()
        self.droppedSpans = dropped
        var configuration = OTel.Configuration.default
        configuration.serviceName = policy.serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.propagators = [.traceContext]
        // The gateway decides what to sample before asking swift-otel for a span (``TraceSampler``).
        configuration.traces.sampler = .alwaysOn
        configuration.traces.batchSpanProcessor.maxQueueSize = policy.queueSize
        configuration.traces.batchSpanProcessor.maxExportBatchSize = min(512, policy.queueSize)
        configuration.traces.batchSpanProcessor.scheduleDelay = .seconds(1)
        configuration.traces.batchSpanProcessor.exportTimeout = policy.otlp.timeout
        configuration.traces.otlpExporter.endpoint = policy.otlp.endpoint
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.timeout = policy.otlp.timeout
        configuration.traces.otlpExporter.headers = policy.otlp.headers.map { ($0.name, String(decoding: $0.value.bytes, as: UTF8.self)) }
        let diagnostics = Logger(label: "portico.tracing") { _ in
            DropCountingLogHandler(forwarding: logger, dropped: dropped, onDropped: onDropped)
        }
        configuration.diagnosticLogger = .custom(diagnostics)
        configuration.diagnosticLogLevel = .warning
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        self.tracer = backend.factory
        self.group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: backend.service)], gracefulShutdownSignals: [], logger: logger))
    }

    /// Starts exporting (once; later calls do nothing).
    func start() {
        running.withLockedValue { task in
            guard task == nil else { return }
            task = Task { [group, logger] in
                do {
                    try await group.run()
                } catch {
                    logger.warning("trace export stopped", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Sends what is queued, then stops. Spans ended afterwards are dropped.
    func shutdown() async {
        guard let task = running.withLockedValue({ $0 }) else { return }
        await group.triggerGracefulShutdown()
        await task.value
    }
}

/// Spans a tracer's batch processor dropped (its queue was full).
final class SpanDropCounter: Sendable {
    private let count = Atomic<Int>(0)

    var value: Int { count.load(ordering: .relaxed) }
    func add(_ spans: Int) { count.add(spans, ordering: .relaxed) }
}

/// Forwards swift-otel's diagnostics to the gateway's logger and counts the spans its batch
/// processor reports dropped (its warning's `dropped_count`, the only report it makes of them).
private struct DropCountingLogHandler: LogHandler {
    let forwarding: Logger
    let dropped: SpanDropCounter
    let onDropped: @Sendable (Int) -> Void
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .warning

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if case .string(let text)? = event.metadata?["dropped_count"], let count = Int(text) {
            dropped.add(count)
            onDropped(count)
        }
        forwarding.log(
            level: event.level, event.message, metadata: event.metadata, source: event.source, file: event.file,
            function: event.function, line: event.line)
    }
}
