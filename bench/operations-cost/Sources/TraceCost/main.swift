// Prints the CPU time (this thread's, CLOCK_THREAD_CPUTIME_ID) a request's tracing costs on its
// event loop, as the gateway does it: its trace started at the head (`ExchangeTrace`), the
// `traceparent` written to the backend request (whose other fields, built for every request, are
// subtracted), the answer's trace fields, the trace ended.
// - unsampled: a policy whose ratio is 0 (what 99 requests in 100 cost at 0.01);
// - sampled: ratio 1, with the spans a proxied request gets (server, 3 stages, 1 attempt); their
//   export happens on swift-otel's own tasks, to a collector that refuses (not counted here:
//   bench/tracing.sh counts the whole process).
// Several rounds; the median is printed with the others.
import Foundation
import NIOCore
import NIOHTTP1
import PorticoPolicy

@testable import Portico

func threadCPUNanos() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}


let requests = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 1_000_000
let rounds = 5

func policy(ratio: Double) throws -> CompiledPolicy {
    let snapshot = try PolicyLoader().load(sources: [
        (
            file: "bench.yaml",
            text: """
            listeners: [{ name: bench, port: 0 }]
            backends: { quotes: { url: "http://127.0.0.1:1" } }
            services:
              stockQuote: { path: "/api/{version}/stockquote", versions: { 1: { proxy: { backend: quotes } } } }
            tracing: { otlp: { endpoint: "http://127.0.0.1:9/v1/traces" }, sampler: { ratio: \(ratio) } }
            """
        )
    ])
    return CompiledPolicy(snapshot, metrics: nil, tracers: registry)
}

let registry = TracerRegistry()
let head = HTTPRequestHead(
    version: .http1_1, method: .GET, uri: "/api/1/stockquote/AAPL",
    headers: ["Host": "gateway.test", "User-Agent": "wrk", "Accept": "*/*"])
let backendHeaders = HTTPHeaders([("Host", "127.0.0.1:1"), ("X-Request-Id", "r"), ("Accept", "*/*"), ("User-Agent", "wrk")])
var lastFields = HTTPHeaders()
var lastAnswer = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Type": "application/json", "Content-Length": "60"])

for (name, ratio) in [("unsampled", 0.0), ("sampled", 1.0)] {
    let compiled = try policy(ratio: ratio)
    registry.activate(compiled.tracer)
    let tracer = compiled.tracer!
    let exchange = Exchange(head: head, requestID: "r", policy: compiled, client: ClientConnection())
    guard case .success(let routed) = Route.resolve(head, in: compiled) else { fatalError("the benchmark's request is not routed") }
    exchange.route = .service(routed)
    exchange.version = 1
    exchange.outcome.status = 200
    let count = name == "sampled" ? requests / 20 : requests
    var perRequest: [Double] = []
    for _ in 0..<rounds {
        // The backend request's fields are built for every request, traced or not: a loop that
        // builds them alone is subtracted.
        var start = threadCPUNanos()
        for _ in 0..<count {
            var fields = HTTPHeaders()
            fields.reserveCapacity(backendHeaders.count + 5)
            for (name, value) in backendHeaders { fields.add(name: name, value: value) }
            withExtendedLifetime(fields) {}
        }
        let building = threadCPUNanos() - start
        start = threadCPUNanos()
        for _ in 0..<count {
            let trace = ExchangeTrace(tracer, head: head, client: exchange.client)
            exchange.trace = trace
            for stage in ["authenticate", "resolve version", "rate limit"] { trace.child(stage, kind: .internal)?.end() }
            let attempt = trace.attemptSpan(method: "GET", url: "http://127.0.0.1:1/api/1/stockquote/AAPL", backend: "quotes", attempt: 1)
            var fields = HTTPHeaders()
            fields.reserveCapacity(backendHeaders.count + 5)
            for (name, value) in backendHeaders { fields.add(name: name, value: value) }
            trace.fields(naming: attempt).write(to: &fields, replacing: false)
            lastFields = fields
            attempt?.endAttempt(status: 200, failure: nil)
            // What the answer's decoration does for a trace (the rest it does for every request).
            if trace.answersTraceparent { lastAnswer.headers.replaceOrAdd(name: "traceparent", value: trace.fields.traceparent) }
            trace.end(exchange)
        }
        perRequest.append(Double(threadCPUNanos() - start - building) / Double(count))
    }
    let sorted = perRequest.sorted()
    let rendered = perRequest.map { String(format: "%.0f", $0) }.joined(separator: " ")
    print("\(name): median \(String(format: "%.0f", sorted[rounds / 2])) ns CPU per request on its event loop (rounds: \(rendered) ns)")
    print("check: \(lastFields.first(name: "traceparent") ?? "no traceparent")")
}
await registry.shutdown()
