import Atomics
import CoreMetrics
import Foundation
import NIOCore
import NIOHTTP1
import PorticoPolicy
import Prometheus

/// The gateway's metrics, made through swift-metrics and kept in a Prometheus registry that
/// `GET /metrics` on the admin listener renders.
///
/// Every label set is bounded: services, versions and backends come from the policy; status
/// classes, refusal kinds, authentication-failure reasons and reload results are fixed lists.
/// Every handle is made up front (at start, or when a policy is compiled), so the request path
/// never looks a metric up by name or takes the factory's lock: a request costs an atomic
/// increment for its counter and three for each of its two duration histograms
/// (``AtomicDurationHistogram``), and no lock.
public final class GatewayMetrics: Sendable {
    /// Rate-limit refusals, by the limit that refused.
    enum RefusalKind: String, CaseIterable {
        case tier, address, backend
        /// `limits.authFailures`: an address's failed authentications (429).
        case authFailures = "auth_failures"
        /// The key's share of the nonce store (429).
        case nonceQuota = "nonce_quota"
        /// The backend's `maxConcurrent` (503).
        case concurrency
    }

    /// Problem types that count as authentication failures, with the label each counts under.
    static let authenticationFailures = [
        "api-key-required", "api-key-invalid", "signature-required", "malformed-signature", "signature-incomplete", "clock-skew",
        "signature-expired", "signature-invalid", "signature-replayed", "key-revoked", "key-not-allowed", "signature-too-large",
        "credentials-required", "token-required", "malformed-token", "token-algorithm-refused", "token-invalid", "token-expired",
        "token-not-yet-valid", "token-audience-refused", "token-claims-missing", "token-scope-insufficient", "token-claim-refused",
        "issuer-keys-unavailable", "sigv4-required", "malformed-sigv4", "sigv4-scope-refused", "sigv4-clock-skew", "sigv4-expired",
        "sigv4-unsigned-payload-refused", "sigv4-invalid",
    ]

    /// Status classes `1xx`…`5xx`, indexed by `status / 100 - 1`.
    static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]

    public let registry: PrometheusCollectorRegistry
    let factory: GatewayMetricsFactory
    let requestDuration: CoreMetrics.Timer
    let tlsHandshakes: CoreMetrics.Counter
    let tlsHandshakeFailures: CoreMetrics.Counter
    let openConnections: CoreMetrics.Meter
    /// Upgraded connections and event streams open now, by kind (``StreamKind``).
    private let openStreams: [StreamKind: CoreMetrics.Meter]
    let policyGeneration: CoreMetrics.Meter
    let policyLoadedAt: CoreMetrics.Meter
    private let spansDropped: CoreMetrics.Counter
    private let refusals: [String: CoreMetrics.Counter]
    private let authentication: [String: CoreMetrics.Counter]
    private let otherAuthentication: CoreMetrics.Counter
    private let reloads: [String: CoreMetrics.Counter]
    private let shadowComparisons: [ShadowResult: CoreMetrics.Counter]
    private let http2Refusals: [HTTP2Refusal: CoreMetrics.Counter]

    /// Why an HTTP/2 connection was sent GOAWAY with an error and closed.
    enum HTTP2Refusal: String, CaseIterable {
        /// More RST_STREAM frames than `maxResets` (rapid reset).
        case resets
        /// More SETTINGS, PING or PRIORITY frames than `maxControlFrames`.
        case controlFrames = "control_frames"
        /// More WINDOW_UPDATE frames than `maxWindowUpdates`.
        case windowUpdates = "window_updates"
        /// Empty DATA frames in a row.
        case emptyData = "empty_data"
        /// A header block over `maxHeaderListSize`, or too many CONTINUATION frames.
        case headerBlock = "header_block"
        /// A header block not whole within `headTimeout`.
        case headerTimeout = "header_timeout"
        /// Too many malformed streams.
        case streamErrors = "stream_errors"
        /// Any other protocol error of the client's.
        case protocolError = "protocol_error"
    }

    /// How a facade's shadow fetch compared with the source that served.
    enum ShadowResult: String, CaseIterable {
        /// Every contract field equal.
        case agreement = "agree"
        /// At least one field differs (the first is logged).
        case mismatch
        /// The shadow source failed (unreachable, 5xx, unparseable, a field missing).
        case shadowFailed = "shadow_failed"
    }
    /// Fleet mode's Redis client reports here.
    let redis: RedisMetrics
    /// What the console charts: each service and version's last 15 minutes.
    public let traffic: TrafficHistory
    /// What the console lists: the last problems answered.
    public let recentProblems: RecentProblems
    /// What the console shows of each facade version: its sources' answers, fallbacks, shadow.
    public let facades = FacadeTallies()
    /// The rate-limit refusals by kind, as numbers the console can read (the Prometheus counters
    /// beside them can only be rendered), in ``RefusalKind/allCases``' order.
    private let refusalTallies: [ManagedAtomic<Int>]

    /// - Parameter trafficClock: monotonic nanoseconds for ``traffic``'s slots (tests pass their own).
    public init(
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        trafficClock: @escaping @Sendable () -> Int64 = { Int64(NIODeadline.now().uptimeNanoseconds) }
    ) {
        self.registry = registry
        traffic = TrafficHistory(clock: trafficClock)
        recentProblems = RecentProblems()
        refusalTallies = RefusalKind.allCases.map { _ in ManagedAtomic(0) }
        let buckets: [Duration] = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
            .seconds(5), .seconds(10), .seconds(30),
        ]
        let factory = GatewayMetricsFactory(
            prometheus: PrometheusMetricsFactory(registry: registry), histograms: AtomicDurationHistograms(bounds: buckets))
        self.factory = factory
        requestDuration = CoreMetrics.Timer(label: "portico_request_duration_seconds", dimensions: [], factory: factory)
        tlsHandshakes = CoreMetrics.Counter(label: "portico_tls_handshakes_total", dimensions: [], factory: factory)
        tlsHandshakeFailures = CoreMetrics.Counter(label: "portico_tls_handshake_failures_total", dimensions: [], factory: factory)
        openConnections = CoreMetrics.Meter(label: "portico_open_connections", dimensions: [], factory: factory)
        openStreams = Dictionary(
            uniqueKeysWithValues: StreamKind.allCases.map {
                ($0, CoreMetrics.Meter(label: "portico_open_streams", dimensions: [("kind", $0.rawValue)], factory: factory))
            })
        policyGeneration = CoreMetrics.Meter(label: "portico_policy_generation", dimensions: [], factory: factory)
        policyLoadedAt = CoreMetrics.Meter(label: "portico_policy_loaded_timestamp_seconds", dimensions: [], factory: factory)
        spansDropped = CoreMetrics.Counter(label: "portico_tracing_spans_dropped_total", dimensions: [], factory: factory)
        refusals = Dictionary(
            uniqueKeysWithValues: RefusalKind.allCases.map {
                (
                    $0.rawValue,
                    CoreMetrics.Counter(label: "portico_rate_limit_refusals_total", dimensions: [("kind", $0.rawValue)], factory: factory)
                )
            })
        authentication = Dictionary(
            uniqueKeysWithValues: Self.authenticationFailures.map {
                (
                    Problem.typePrefix + $0,
                    CoreMetrics.Counter(
                        label: "portico_auth_failures_total", dimensions: [("reason", $0.replacingHyphens())], factory: factory)
                )
            })
        shadowComparisons = Dictionary(
            uniqueKeysWithValues: ShadowResult.allCases.map {
                ($0, CoreMetrics.Counter(label: "portico_facade_shadow_total", dimensions: [("result", $0.rawValue)], factory: factory))
            })
        otherAuthentication = CoreMetrics.Counter(label: "portico_auth_failures_total", dimensions: [("reason", "other")], factory: factory)
        http2Refusals = Dictionary(
            uniqueKeysWithValues: HTTP2Refusal.allCases.map {
                (
                    $0,
                    CoreMetrics.Counter(
                        label: "portico_http2_connections_refused_total", dimensions: [("reason", $0.rawValue)], factory: factory)
                )
            })
        redis = RedisMetrics(registry: registry)
        reloads = Dictionary(
            uniqueKeysWithValues: ["applied", "refused", "dry_run"].map {
                ($0, CoreMetrics.Counter(label: "portico_policy_reloads_total", dimensions: [("result", $0)], factory: factory))
            })
    }

    /// The registry's content in Prometheus's text format (version 0.0.4).
    public func render() -> String {
        var text = registry.emitToString()
        factory.histograms.render(into: &text)
        redis.histograms.render(into: &text)
        return text
    }

    /// The same metrics as OpenMetrics text (`application/openmetrics-text; version=1.0.0`), with
    /// `extra` Prometheus text (the backends' targets) before its `# EOF`: what carries exemplars.
    public func renderOpenMetrics(adding extra: String = "") -> String {
        var text = OpenMetricsText.converting(registry.emitToString() + extra)
        factory.histograms.render(into: &text, openMetrics: true)
        redis.histograms.render(into: &text, openMetrics: true)
        text += "# EOF\n"
        return text
    }

    /// Counts what an error answer says about authentication and limits. Only failures come here.
    func problemAnswered(_ problem: Problem) {
        if let counter = authentication[problem.type] {
            counter.increment()
            return
        }
        // A 401 or 403 of a type this list does not know yet still counts, as `other`.
        if problem.status == .unauthorized || problem.status == .forbidden {
            otherAuthentication.increment()
            return
        }
        let kind: RefusalKind?
        switch problem.type {
        case Problem.typePrefix + "rate-limited":
            kind = problem.extensions.first(where: { $0.0 == "limit" }).flatMap { RefusalKind(rawValue: $0.1) }
        case Problem.typePrefix + "replay-quota-exceeded":
            kind = .nonceQuota
        case Problem.typePrefix + "backend-busy":
            kind = .concurrency
        default:
            kind = nil
        }
        guard let kind else { return }
        refusals[kind.rawValue]?.increment()
        refusalTallies[RefusalKind.allCases.firstIndex(of: kind)!].wrappingIncrement(ordering: .relaxed)
    }

    /// The rate-limit refusals since start, by kind (`tier`, `address`, `backend`, …).
    var refusalCounts: [String: Int] {
        Dictionary(uniqueKeysWithValues: zip(RefusalKind.allCases.map(\.rawValue), refusalTallies.map { $0.load(ordering: .relaxed) }))
    }

    /// One refusal of the authenticate stage, by service, by the scheme whose problem answered
    /// (`none`: the request carried no credentials the service takes) and by the problem's type.
    func authenticationFailed(service: String, scheme: AuthScheme?, problem: Problem) {
        let reason = problem.type.hasPrefix(Problem.typePrefix) ? String(problem.type.dropFirst(Problem.typePrefix.count)) : "other"
        CoreMetrics.Counter(
            label: "portico_authentication_failures_total",
            dimensions: [("service", service), ("scheme", scheme?.rawValue ?? "none"), ("reason", reason.replacingHyphens())],
            factory: factory
        ).increment()
    }

    func connectionOpened() { openConnections.increment() }
    /// Spans the trace exporter's full queue dropped (a collector slow or away).
    func tracingSpansDropped(_ count: Int) { spansDropped.increment(by: count) }
    func shadowCompared(_ result: ShadowResult, service: String, version: Int) {
        shadowComparisons[result]?.increment()
        facades.shadowCompared(service: service, version: version, result: result.rawValue)
    }
    func connectionClosed() { openConnections.decrement() }
    func streamOpened(_ kind: StreamKind) { openStreams[kind]?.increment() }
    func streamClosed(_ kind: StreamKind) { openStreams[kind]?.decrement() }
    func tlsHandshakeCompleted() { tlsHandshakes.increment() }
    func tlsHandshakeFailed() { tlsHandshakeFailures.increment() }
    func http2ConnectionRefused(_ reason: HTTP2Refusal) { http2Refusals[reason]?.increment() }

    /// A reload ended: `applied`, `refused` or `dry_run`.
    func reloadEnded(_ result: String) { reloads[result]?.increment() }

    /// The policy now active.
    func policyInstalled(_ revision: PolicyRevision) {
        policyGeneration.set(Int64(revision.generation))
        policyLoadedAt.set(revision.loadedAt.timeIntervalSince1970)
    }

    /// The per-request handles for one compiled policy.
    func requestMetrics(for snapshot: PolicySnapshot) -> RequestMetrics {
        RequestMetrics(snapshot: snapshot, factory: factory, traffic: traffic)
    }
}

extension String {
    /// Prometheus label values may hold hyphens, but label values that read like metric words are
    /// easier to query: `signature-invalid` → `signature_invalid`.
    fileprivate func replacingHyphens() -> String { String(map { $0 == "-" ? "_" : $0 }) }
}

/// The counters and histograms one compiled policy's requests update, found by index rather than by
/// name: per routed service and version a counter per status class, per backend an upstream
/// duration histogram. Made when the policy is compiled; the registry hands back the same series
/// for the same labels, so a reload continues the counts of what it keeps.
///
/// A class: each finished exchange reaches it through its compiled policy, and a struct of a dozen
/// references was copied out for each (a retain and a release of every one of them).
final class RequestMetrics: Sendable {
    /// What one routed version's requests update: its five status-class counters and its series in
    /// the console's traffic history, found with one lookup.
    private struct VersionMetrics {
        let statusClasses: [CoreMetrics.Counter]
        let traffic: TrafficHistory.Series
    }

    /// Indexed like ``RouteTable/services``; per version, its counters and traffic series.
    private let services: [[Int: VersionMetrics]]
    /// Per service, requests answered before a version was chosen (refused by authentication,
    /// an unknown version), counted with an empty `version`.
    private let unversioned: [[CoreMetrics.Counter]]
    /// Requests that matched no service (`service` and `version` empty).
    private let unrouted: [CoreMetrics.Counter]
    private let upstream: [String: CoreMetrics.Timer]
    /// Requests by protocol: HTTP/1.0, HTTP/1.1, HTTP/2.
    private let protocols: [CoreMetrics.Counter]
    let requestDuration: CoreMetrics.Timer
    /// The same series as ``requestDuration``, reached directly to give sampled requests exemplars.
    private let requestDurations: AtomicDurationHistogram

    private let history: TrafficHistory

    init(snapshot: PolicySnapshot, factory: GatewayMetricsFactory, traffic history: TrafficHistory) {
        self.history = history
        history.prune(
            keeping: Set(
                snapshot.routes.services.flatMap { service in
                    service.policy.versions.keys.map { TrafficHistory.SeriesKey(service: service.name, version: String($0)) }
                }))
        func counters(service: String, version: String) -> [CoreMetrics.Counter] {
            GatewayMetrics.statusClasses.map {
                CoreMetrics.Counter(
                    label: "portico_requests_total", dimensions: [("service", service), ("version", version), ("status_class", $0)],
                    factory: factory)
            }
        }
        services = snapshot.routes.services.map { service in
            Dictionary(
                uniqueKeysWithValues: service.policy.versions.keys.map {
                    let version = String($0)
                    return (
                        $0,
                        VersionMetrics(
                            statusClasses: counters(service: service.name, version: version),
                            traffic: history.series(service: service.name, version: version))
                    )
                })
        }
        unversioned = snapshot.routes.services.map { counters(service: $0.name, version: "") }
        unrouted = counters(service: "", version: "")
        upstream = snapshot.policy.backends.mapValues {
            CoreMetrics.Timer(label: "portico_upstream_duration_seconds", dimensions: [("backend", $0.name)], factory: factory)
        }
        requestDuration = CoreMetrics.Timer(label: "portico_request_duration_seconds", dimensions: [], factory: factory)
        requestDurations = factory.histograms.histogram(name: "portico_request_duration_seconds", labels: [])
        protocols = ["HTTP/1.0", "HTTP/1.1", "HTTP/2"].map {
            CoreMetrics.Counter(label: "portico_requests_by_protocol_total", dimensions: [("protocol", $0)], factory: factory)
        }
    }

    /// Counts one finished exchange.
    func exchangeEnded(_ exchange: Exchange) {
        let status = Int(exchange.outcome.status)
        let statusClass = min(max(status / 100, 1), 5) - 1
        var series: TrafficHistory.Series?
        if let service = exchange.routed?.service.index {
            if let version = exchange.version, let metrics = services[service][version] {
                metrics.statusClasses[statusClass].increment()
                series = metrics.traffic
            } else {
                unversioned[service][statusClass].increment()
            }
        } else {
            unrouted[statusClass].increment()
        }
        let version = exchange.head.version
        protocols[version.major == 2 ? 2 : version.minor == 0 ? 0 : 1].increment()
        let duration = (NIODeadline.now() - exchange.started).nanoseconds
        if let series { history.record(series, status: status, nanoseconds: duration) }
        if let trace = exchange.trace, trace.sampled {
            requestDurations.record(duration, exemplar: (trace.fields.traceID, trace.fields.spanID))
        } else {
            requestDuration.recordNanoseconds(duration)
        }
        if let duration = exchange.outcome.upstreamDuration,
            let backend = exchange.outcome.backend ?? exchange.destination?.proxyBackend?.name, let timer = upstream[backend]
        {
            timer.recordNanoseconds(TimeAmount(duration).nanoseconds)
        }
    }
}
