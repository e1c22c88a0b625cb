// Prints the CPU time (this thread's, CLOCK_THREAD_CPUTIME_ID) per finished exchange counted in
// the metrics: what `AccessLogObserver` does for every request whatever the access log's setting
// (its service/version/status-class counter, the request-duration and upstream-duration
// histograms, found through the compiled policy's `RequestMetrics`). One thread: the figure leaves
// out what two cores incrementing the same counters cost in cache traffic. Several rounds; the
// median is printed with the others.
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

let exchanges = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 10_000_000
let rounds = 5

let snapshot = try PolicyLoader().load(sources: [
    (
        file: "bench.yaml",
        text: """
        listeners: [{ name: bench, port: 0 }]
        backends: { quotes: { url: "http://127.0.0.1:1" } }
        services:
          stockQuote: { path: "/api/{version}/stockquote", versions: { 1: { proxy: { backend: quotes } }, 2: { proxy: { backend: quotes } } } }
        """
    )
])
let metrics = GatewayMetrics()
let policy = CompiledPolicy(snapshot, metrics: metrics)
let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/api/2/stockquote/AAPL", headers: ["Host": "gateway.test"])
let exchange = Exchange(head: head, requestID: "r", policy: policy, client: ClientConnection())
guard case .success(let routed) = Route.resolve(head, in: policy) else { fatalError("the benchmark's request is not routed") }
exchange.route = .service(routed)
exchange.version = 2
exchange.outcome.backend = "quotes"
exchange.outcome.status = 200
exchange.outcome.upstreamDuration = .microseconds(412)
let requestMetrics = policy.requestMetrics!

var perExchange: [Double] = []
for _ in 0..<rounds {
    let start = threadCPUNanos()
    for _ in 0..<exchanges { requestMetrics.exchangeEnded(exchange) }
    perExchange.append(Double(threadCPUNanos() - start) / Double(exchanges))
}
let sorted = perExchange.sorted()
let rendered = perExchange.map { String(format: "%.1f", $0) }.joined(separator: " ")
print("metrics: median \(String(format: "%.1f", sorted[rounds / 2])) ns CPU per exchange (rounds: \(rendered) ns)")
let counted = metrics.render().split(separator: "\n").first {
    $0.hasPrefix(#"portico_requests_total{service="stockQuote",version="2",status_class="2xx"}"#)
}
print("check: \(counted ?? "missing") (expected \(rounds * exchanges))")
