import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import PorticoRedisTesting
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

@testable import Portico

/// Traces through the real gateway, exported over OTLP/HTTP to a real receiver (Python decoding
/// with OpenTelemetry's own protobuf definitions), and the trace context a real backend receives.
@Suite(
    "OpenTelemetry traces", .enabled(if: OTLPCollector.installed, "opentelemetry-proto is not installed (scripts/interop/setup.sh)"))
struct TracingTests {
    static let secret = "shop-secret-0123456789abcdefghijklmnopqrstuvwxyz"
    static let key = "shop.\(secret)"
    static let incomingTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let incomingSpan = "00f067aa0ba902b7"
    /// How long a test waits for spans to reach the receiver: a batch leaves every second, but on a
    /// loaded machine the exporter's tasks may wait long for a thread (no duration is asserted).
    static let exportWait: Duration = .seconds(90)

    static func policy(backend: String, collector: String, tracing extra: String = "", timeout: String = "2s") -> String {
        """
        backends:
          app: { \(backend) }
        services:
          orders:
            path: /orders
            auth: apiKey
            versions: { 1: { proxy: { backend: app } } }
        keys:
          shop: { secret: "\(secret)", demo: true, services: [orders] }
        tracing:
          serviceName: portico-test
          otlp: { endpoint: "\(collector)", headers: { Authorization: "Bearer collector-token" }, timeout: \(timeout) }
        \(extra.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        """
    }

    static func url(_ port: Int) -> String { "url: \"http://127.0.0.1:\(port)\"" }

    /// A `traceparent`'s trace id, span id and flags.
    static func parts(_ traceparent: String?) -> (trace: String, span: String, flags: String)? {
        guard let fields = traceparent?.split(separator: "-"), fields.count == 4, fields[0] == "00" else { return nil }
        return (String(fields[1]), String(fields[2]), String(fields[3]))
    }

    static func get(_ gateway: TestGateway, _ target: String, headers: [(String, String)] = []) async throws -> RawHTTPClient.Response {
        try await offThePool { try gateway.connect().request("GET", target, headers: [("X-API-Key", Self.key)] + headers) }
    }

    static func echoed(_ response: RawHTTPClient.Response) throws -> Echoed {
        try JSONDecoder().decode(Echoed.self, from: Data(response.bodyText.utf8))
    }

    @Test("a request's trace: a server span named by its route, a span per stage, a client span naming what the backend received")
    func requestTrace() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        let recorder = RecordingLogHandler()
        try await withGateway(
            logger: Logger(label: "access") { _ in recorder },
            policy: { Self.policy(backend: Self.url($0[0]), collector: collector.endpoint) }
        ) { gateway, _ in
            let response = try await Self.get(gateway, "/orders/17?token=query-secret")
            #expect(response.status == 200)
            #expect(response.header("traceparent") == nil, "the client learns its trace only if the policy says so")
            let sent = try #require(Self.parts(try Self.echoed(response).headers["traceparent"]), "the backend got no traceparent")
            #expect(sent.flags == "01")

            // Five spans at least, the server's among them: it ends last and may come in a later export.
            #expect(
                await eventually(within: Self.exportWait) {
                    let spans = collector.spans(ofTrace: sent.trace)
                    return spans.count >= 5 && spans.contains { $0.kind == "SPAN_KIND_SERVER" }
                }, "\(collector.spans)")
            let spans = collector.spans(ofTrace: sent.trace)
            let server = try #require(spans.first { $0.kind == "SPAN_KIND_SERVER" })
            #expect(server.name == "GET /orders" && server.string("http.route") == "/orders")
            #expect(server.parentSpanID == "", "a request from an untrusted client starts its own trace")
            #expect(server.int("http.response.status_code") == 200 && server.string("http.request.method") == "GET")
            #expect(server.string("url.path") == "/orders/17" && server.string("portico.service") == "orders")
            #expect(server.string("portico.key_id") == "shop")
            let client = try #require(spans.first { $0.kind == "SPAN_KIND_CLIENT" })
            #expect(client.parentSpanID == server.spanID)
            #expect(client.spanID == sent.span, "the backend's parent is the attempt's client span")
            #expect(client.int("http.response.status_code") == 200 && client.string("server.address") == "127.0.0.1")
            #expect(client.string("url.full")?.hasSuffix("/orders/17") == true)
            for stage in ["authenticate", "resolve version", "rate limit"] {
                let span = spans.first { $0.name == stage }
                #expect(span?.kind == "SPAN_KIND_INTERNAL" && span?.parentSpanID == server.spanID, "\(stage): \(String(describing: span))")
            }
            #expect(!spans.contains { $0.name == "cache lookup" }, "a service that does not cache has no cache span")
            // Nothing secret or from the query in any attribute.
            let values = spans.flatMap { $0.attributes.values }.map { "\($0)" }.joined(separator: " ")
            #expect(!values.contains("query-secret") && !values.contains(Self.secret))
            // How it arrived: OTLP/HTTP protobuf, the policy's headers, the policy's service name.
            #expect(server.service == "portico-test" && server.contentType == "application/x-protobuf")
            #expect(server.authorization == "Bearer collector-token")
            // The access log joins the trace.
            let line = try #require(recorder.records.first { $0.message == "access" })
            #expect(line.metadata["trace_id"] == .string(sent.trace) && line.metadata["span_id"] == .string(server.spanID))
        }
    }

    @Test("a trusted caller's traceparent and tracestate are continued; an untrusted caller's are replaced by a trace of the gateway's")
    func trustIncoming() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        let incoming = [("traceparent", "00-\(Self.incomingTrace)-\(Self.incomingSpan)-01"), ("tracestate", "vendor=abc")]
        try await withGateway(
            policy: {
                Self.policy(backend: Self.url($0[0]), collector: collector.endpoint, tracing: "trustIncoming: { networks: [127.0.0.0/8] }")
            }
        ) { gateway, servers in
            let echoed = try Self.echoed(try await Self.get(gateway, "/orders/1", headers: incoming))
            let sent = try #require(Self.parts(echoed.headers["traceparent"]))
            #expect(sent.trace == Self.incomingTrace && sent.span != Self.incomingSpan)
            #expect(echoed.headers["tracestate"] == "vendor=abc")
            #expect(
                await eventually(within: Self.exportWait) {
                    collector.spans(ofTrace: Self.incomingTrace).contains { $0.kind == "SPAN_KIND_SERVER" }
                })
            let server = try #require(collector.spans(ofTrace: Self.incomingTrace).first { $0.kind == "SPAN_KIND_SERVER" })
            #expect(server.parentSpanID == Self.incomingSpan, "the caller's span is the gateway's parent: one trace, not two")

            // Trusted from another network only: this caller's context is not continued.
            try gateway.reload(
                policy: Self.policy(
                    backend: Self.url(servers[0].port), collector: collector.endpoint, tracing: "trustIncoming: { networks: [10.0.0.0/8] }")
            )
            let replaced = try Self.echoed(try await Self.get(gateway, "/orders/2", headers: incoming))
            let fresh = try #require(Self.parts(replaced.headers["traceparent"]))
            #expect(fresh.trace != Self.incomingTrace)
            #expect(replaced.headers["tracestate"] == nil, "an untrusted caller's tracestate is not passed on")
            #expect(
                await eventually(within: Self.exportWait) {
                    collector.spans(ofTrace: fresh.trace).contains { $0.kind == "SPAN_KIND_SERVER" }
                })
            #expect(collector.spans(ofTrace: fresh.trace).first { $0.kind == "SPAN_KIND_SERVER" }?.parentSpanID == "")

            // Trusted by the listener it came in on.
            try gateway.reload(
                policy: Self.policy(
                    backend: Self.url(servers[0].port), collector: collector.endpoint, tracing: "trustIncoming: { listeners: [test] }"))
            let byListener = try Self.echoed(try await Self.get(gateway, "/orders/3", headers: incoming))
            #expect(Self.parts(byListener.headers["traceparent"])?.trace == Self.incomingTrace)
        }
    }

    @Test("an unsampled request makes no span yet carries its trace to the backend; a sampled one after it is exported")
    func sampling() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        let unsampledTrace = "0af7651916cd43dd8448eb211c80319c"
        try await withGateway(
            policy: {
                Self.policy(
                    backend: Self.url($0[0]), collector: collector.endpoint,
                    tracing: "sampler: { ratio: 0, parentBased: true }\ntrustIncoming: true")
            }
        ) { gateway, _ in
            // The caller decided not to sample: the gateway follows, and still propagates.
            let quiet = try Self.echoed(
                try await Self.get(gateway, "/orders/1", headers: [("traceparent", "00-\(unsampledTrace)-\(Self.incomingSpan)-00")]))
            let carried = try #require(Self.parts(quiet.headers["traceparent"]))
            #expect(carried.trace == unsampledTrace && carried.flags == "00")
            // No caller's decision and a ratio of 0: a new trace, unsampled, still propagated.
            let fresh = try #require(Self.parts(try Self.echoed(try await Self.get(gateway, "/orders/2")).headers["traceparent"]))
            #expect(fresh.trace != unsampledTrace && fresh.flags == "00")
            // The caller decided to sample: exported, and only after the unsampled requests ended.
            _ = try await Self.get(gateway, "/orders/3", headers: [("traceparent", "00-\(Self.incomingTrace)-\(Self.incomingSpan)-01")])
            #expect(
                await eventually(within: Self.exportWait) {
                    collector.spans(ofTrace: Self.incomingTrace).contains { $0.kind == "SPAN_KIND_SERVER" }
                })
            #expect(collector.spans(ofTrace: unsampledTrace).isEmpty && collector.spans(ofTrace: fresh.trace).isEmpty)
        }
    }

    @Test("the client gets its trace's traceparent only when the policy says so, and never the backend's own")
    func responseTraceparent() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        let backendsOwn = "00-11111111111111111111111111111111-2222222222222222-01"
        let tracing: BackendServer.Handler = { request in
            var headers = HTTPHeaders()
            headers.add(name: "traceparent", value: backendsOwn)
            headers.add(name: "content-type", value: "text/plain")
            return .full(status: .ok, headers: headers, body: ByteBuffer(string: request.headers.first(name: "traceparent") ?? "none"))
        }
        try await withGateway(
            backends: [tracing], policy: { Self.policy(backend: Self.url($0[0]), collector: collector.endpoint) }
        ) { gateway, servers in
            let hidden = try await Self.get(gateway, "/orders/1")
            #expect(hidden.status == 200 && hidden.header("traceparent") == nil)
            try gateway.reload(
                policy: Self.policy(backend: Self.url(servers[0].port), collector: collector.endpoint, tracing: "responseTraceparent: true")
            )
            let shown = try await Self.get(gateway, "/orders/2")
            let returned = try #require(Self.parts(shown.header("traceparent")))
            let received = try #require(Self.parts(shown.bodyText))
            #expect(returned.trace == received.trace, "the client's traceparent names its own request's trace")
            #expect(shown.header("traceparent") != backendsOwn)

            // Without tracing the gateway is no party to the trace: both ways, the fields pass untouched.
            let untraced = Self.policy(backend: Self.url(servers[0].port), collector: collector.endpoint)
            let tracingSection = try #require(untraced.range(of: "tracing:"))
            try gateway.reload(policy: String(untraced[..<tracingSection.lowerBound]))
            let callers = "00-\(Self.incomingTrace)-\(Self.incomingSpan)-01"
            let passed = try await Self.get(gateway, "/orders/3", headers: [("traceparent", callers), ("tracestate", "vendor=abc")])
            #expect(passed.bodyText == callers, "the backend gets the caller's traceparent as sent")
            #expect(passed.header("traceparent") == backendsOwn, "the client gets the backend's")
        }
    }

    @Test("a retried request: a client span per attempt, the first failed, the second counted as a resend and naming what its backend got")
    func retryAttempts() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        let dead = try RefusingPort.make()
        try await withGateway(
            policy: {
                Self.policy(
                    backend:
                        "targets: [{ url: \"http://127.0.0.1:\(dead)\" }, { url: \"http://127.0.0.1:\($0[0])\" }], balance: roundRobin, retries: { attempts: 2, on: [connect-failure] }, outlierDetection: off",
                    collector: collector.endpoint)
            }
        ) { gateway, _ in
            var traces: [String: String] = [:]
            for index in 0..<4 {
                let echoed = try Self.echoed(try await Self.get(gateway, "/orders/\(index)"))
                let sent = try #require(Self.parts(echoed.headers["traceparent"]))
                traces[sent.trace] = sent.span
            }
            // Round robin sends some first attempts to the dead target: those requests have two attempts.
            #expect(
                await eventually(within: Self.exportWait) {
                    traces.keys.allSatisfy { collector.spans(ofTrace: $0).contains { $0.kind == "SPAN_KIND_SERVER" } }
                })
            let retried = traces.keys.filter { trace in collector.spans(ofTrace: trace).filter { $0.kind == "SPAN_KIND_CLIENT" }.count == 2
            }
            #expect(!retried.isEmpty, "\(collector.spans.map(\.name))")
            for trace in retried {
                let attempts = collector.spans(ofTrace: trace).filter { $0.kind == "SPAN_KIND_CLIENT" }
                let failed = try #require(attempts.first { $0.int("http.request.resend_count") == nil })
                let resent = try #require(attempts.first { $0.int("http.request.resend_count") == 1 })
                #expect(failed.status == "STATUS_CODE_ERROR" && failed.int("http.response.status_code") == nil)
                #expect(failed.int("server.port") == dead)
                #expect(resent.int("http.response.status_code") == 200 && resent.spanID == traces[trace])
            }
        }
    }

    @Test(
        "a collector that refuses, hangs or is down changes no answer, and the gateway still stops",
        arguments: [["--status", "503"], ["--hold"], []])
    func collectorFailures(arguments: [String]) async throws {
        let collector = try OTLPCollector(arguments)
        defer { collector.stop() }
        let endpoint = arguments.isEmpty ? "http://127.0.0.1:\(try RefusingPort.make())/v1/traces" : collector.endpoint
        try await withGateway(
            policy: { Self.policy(backend: Self.url($0[0]), collector: endpoint, timeout: "1s") }
        ) { gateway, servers in
            for index in 0..<20 {
                let response = try await Self.get(gateway, "/orders/\(index)")
                #expect(response.status == 200, "request \(index)")
            }
            #expect(servers[0].requestsReceived == 20)
            if !arguments.isEmpty {
                // The receiver decoded what was posted before refusing or hanging: export was tried.
                #expect(await eventually(within: Self.exportWait) { collector.spans.contains { $0.kind == "SPAN_KIND_SERVER" } })
            }
        }
    }

    @Test("a collector that hangs fills the bounded queue: spans are dropped and counted, and every answer is the same")
    func boundedQueue() async throws {
        let collector = try OTLPCollector(["--hold"])
        defer { collector.stop() }
        try await withGateway(
            policy: { Self.policy(backend: Self.url($0[0]), collector: collector.endpoint, tracing: "queueSize: 16", timeout: "3s") }
        ) { gateway, servers in
            for index in 0..<40 {
                #expect(try await Self.get(gateway, "/orders/\(index)").status == 200, "request \(index)")
            }
            #expect(servers[0].requestsReceived == 40)
            let tracer = try #require(gateway.gateway.store.current.tracer)
            #expect(
                await eventually(within: Self.exportWait) { tracer.droppedSpans.value > 0 },
                "40 requests of 5 spans each, a queue of 16, a collector that never answers")
        }
    }

    struct ParsedExemplar: Decodable {
        var sample: String
        var labels: [String: String]
        var exemplarLabels: [String: String]
        var value: Double

        enum CodingKeys: String, CodingKey { case sample, labels, exemplarLabels = "exemplar_labels", value }
    }

    @Test("a sampled request's trace is its duration bucket's exemplar in OpenMetrics, as Prometheus' own parser reads it")
    func exemplars() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        try await withGateway(policy: { Self.policy(backend: Self.url($0[0]), collector: collector.endpoint) }) { gateway, _ in
            let sent = try #require(Self.parts(try Self.echoed(try await Self.get(gateway, "/orders/1")).headers["traceparent"]))
            let text = gateway.gateway.metrics.renderOpenMetrics()
            #expect(text.hasSuffix("# EOF\n"))
            #expect(!gateway.gateway.metrics.render().contains("trace_id"), "the Prometheus text format has no exemplars")
            let script = InteropTests.repositoryRoot.appendingPathComponent("scripts/interop/openmetrics-exemplars.py").path
            let parsed = try await offThePool { try ChildProcess.run(InteropTests.python!, [script], input: Data(text.utf8)) }
            try #require(parsed.termination == .exited(0), "\(String(decoding: parsed.errors, as: UTF8.self))\n\(text)")
            let exemplars = try JSONDecoder().decode([ParsedExemplar].self, from: parsed.output)
            let exemplar = try #require(exemplars.first { $0.sample == "portico_request_duration_seconds_bucket" }, "\(exemplars)")
            #expect(exemplar.exemplarLabels["trace_id"] == sent.trace)
            #expect(exemplar.exemplarLabels["span_id"]?.count == 16 && exemplar.value > 0)
            // The admin listener answers OpenMetrics to a scraper that asks for it, plain text otherwise.
            let api = AdminAPI(gateway: gateway.gateway, reloader: nil, boundAddress: "127.0.0.1")
            var scraper = AdminAPI.RequestOrigin.tool
            scraper.accept = "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5"
            let open = await api.respond(method: .GET, uri: "/metrics", authorization: nil, from: scraper)
            #expect(open.contentType.hasPrefix("application/openmetrics-text"))
            #expect(String(decoding: open.body, as: UTF8.self).contains("trace_id=\"\(sent.trace)\""))
            // All of it, the backends' targets included, is OpenMetrics the parser takes.
            let whole = try await offThePool { try ChildProcess.run(InteropTests.python!, [script], input: Data(open.body)) }
            #expect(whole.termination == .exited(0), "\(String(decoding: whole.errors, as: UTF8.self))")
            let plain = await api.respond(method: .GET, uri: "/metrics", authorization: nil)
            #expect(plain.contentType.hasPrefix("text/plain; version=0.0.4"))
        }
    }

    @Test(
        "fleet mode: the rate-limit span holds the Redis round trip as a client span; with Redis down, that span says why",
        .enabled(if: RedisServerProcess.isInstalled))
    func redisRoundTrip() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        let redis = try RedisServerProcess()
        defer { redis.stop() }
        let cluster = "cluster: { redis: \"redis://127.0.0.1:\(redis.port)\", timeout: 5s, onFailure: { limits: local, nonces: local } }"
        try await withGateway(
            policy: {
                Self.policy(
                    backend: Self.url($0[0]) + ", rateLimit: { rate: 1000/s, burst: 1000 }", collector: collector.endpoint) + "\n" + cluster
            }
        ) { gateway, _ in
            func roundTrip(_ target: String) async throws -> (limit: OTLPCollector.Span, redis: OTLPCollector.Span) {
                let response = try await Self.get(gateway, target)
                #expect(response.status == 200)
                let trace = try #require(Self.parts(try Self.echoed(response).headers["traceparent"])).trace
                // Both, not the first: the Redis span ends (and may be exported, in a batch of its
                // own) before the rate-limit span around it does.
                #expect(
                    await eventually(within: Self.exportWait) {
                        let spans = collector.spans(ofTrace: trace)
                        return spans.contains { $0.name == "EVALSHA" } && spans.contains { $0.name == "rate limit" }
                    })
                let spans = collector.spans(ofTrace: trace)
                let limit = try #require(spans.first { $0.name == "rate limit" })
                let redis = try #require(spans.first { $0.name == "EVALSHA" })
                return (limit, redis)
            }
            let (limit, up) = try await roundTrip("/orders/1")
            #expect(up.kind == "SPAN_KIND_CLIENT" && up.parentSpanID == limit.spanID)
            #expect(up.string("db.system.name") == "redis" && up.string("db.operation.name") == "EVALSHA")
            #expect(up.string("server.address") == "127.0.0.1" && up.int("server.port") == redis.port)
            #expect(up.status != "STATUS_CODE_ERROR" && up.string("error.type") == nil)
            #expect(up.attributes.count == 5, "the command, database and address only, never a key: \(up.attributes)")

            redis.stop()
            let (_, down) = try await roundTrip("/orders/2")
            #expect(down.status == "STATUS_CODE_ERROR" && down.string("error.type") != nil, "\(down)")
        }
    }

    @Test("a facade's fetch: a span for its source, a client span under it, and the source's backend gets that attempt as its parent")
    func facadeSource() async throws {
        let collector = try OTLPCollector()
        defer { collector.stop() }
        let received = Mutex<String?>(nil)
        let source: BackendServer.Handler = { request in
            received.withLock { $0 = request.headers.first(name: "traceparent") }
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            return .full(status: .ok, headers: headers, body: ByteBuffer(string: #"{"symbol":"AAPL","price":189.84}"#))
        }
        try await withGateway(
            backends: [source],
            policy: { ports in
                """
                backends:
                  feed: { url: "http://127.0.0.1:\(ports[0])" }
                services:
                  quote:
                    path: /quote
                    versions:
                      1:
                        facade:
                          parameters: /{symbol}
                          contract: { symbol: string, price: number }
                          sources:
                            first: { backend: feed, request: "/q?s={symbol}", format: json, fields: { symbol: /symbol, price: /price } }
                          active: first
                tracing:
                  otlp: { endpoint: "\(collector.endpoint)" }
                """
            }
        ) { gateway, _ in
            let response = try await offThePool { try gateway.connect().request("GET", "/quote/AAPL") }
            #expect(response.status == 200, "\(response.bodyText)")
            let sent = try #require(Self.parts(received.withLock { $0 }), "the facade's source got no traceparent")
            // The server span ends last, after the answer is written: it may come in a later export
            // than the source's spans.
            #expect(
                await eventually(within: Self.exportWait) {
                    let spans = collector.spans(ofTrace: sent.trace)
                    return spans.count >= 3 && spans.contains { $0.kind == "SPAN_KIND_SERVER" }
                },
                "\(collector.spans.count) spans received in all: \(collector.spans.map { "\($0.traceID) \($0.name)" })")
            let spans = collector.spans(ofTrace: sent.trace)
            let server = try #require(spans.first { $0.kind == "SPAN_KIND_SERVER" })
            #expect(server.name == "GET /quote")
            let fetch = try #require(spans.first { $0.name == "facade source first" })
            #expect(fetch.parentSpanID == server.spanID && fetch.string("portico.backend") == "feed")
            let attempt = try #require(spans.first { $0.kind == "SPAN_KIND_CLIENT" })
            #expect(attempt.parentSpanID == fetch.spanID && attempt.spanID == sent.span)
            #expect(
                attempt.string("url.full")?.hasSuffix("/q") == true,
                "the query is not recorded: \(String(describing: attempt.string("url.full")))")
        }
    }
}
