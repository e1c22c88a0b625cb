// What a request costs the gateway in machine-independent units, counted on its own threads:
// allocations, and the Swift runtime's dynamic exclusivity checks and dynamic casts.
//
//   Allocations [requests] [warm-up] [certificate key]
//
// Starts, in this process: a small backend (its own event loop), the real `Gateway` with a policy
// like bench/run.sh's (its own event loop, the only threads marked for counting), and a blocking
// client on the main thread. Runs the requests on one keep-alive connection each: straight to the
// backend, then through the gateway over HTTP (the open proxy, a route signed with RFC 9421, a
// facade over the same backend, a 404 answered without one), then over TLS (when a certificate is
// given).
//
// Two allocation figures per run: on the gateway's threads alone, and on every thread of the
// process. The second, minus the direct run's (client and backend alone), is a check on the first
// that needs no thread marking; over TLS it also holds the client's own TLS work.
import CMallocCounter
import Foundation
import Logging
import NIOCore
import NIOPosix
import Portico
import PorticoClient
import PorticoHTTP
import PorticoPolicy
import PorticoSigning

#if canImport(Glibc)
    import Glibc
#endif

// A peer closing must show up as an error from the client, not as a silent death by SIGPIPE.
signal(SIGPIPE, SIG_IGN)

let arguments = CommandLine.arguments.dropFirst()
let requests = arguments.first.flatMap { Int($0) } ?? 10_000
let warmUp = arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000
let certificate = arguments.dropFirst(2).first
let privateKey = arguments.dropFirst(3).first

let backendGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let gatewayGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let backend = try await QuoteBackend.start(group: backendGroup)
let backendPort = backend.localAddress!.port!

let benchSecret = "portico-allocations-bench-secret-0123456789"
let tlsListener = certificate.map { ", tls: { certificate: \($0), privateKey: \(privateKey!) }" }
let policy = """
    listeners:
      - { name: plain, address: 127.0.0.1, port: 0 }
    \(tlsListener.map { "  - { name: tls, address: 127.0.0.1, port: 0\($0) }" } ?? "")
    accessLog: { enabled: false }
    backends:
      quotes: { url: "http://127.0.0.1:\(backendPort)", timeout: 5s }
    services:
      stockQuote:
        path: /api/{version}/stockquote
        versions:
          1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
      signedQuote:
        path: /signed/{version}/stockquote
        auth: signature
        versions:
          1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
      facadeQuote:
        path: /facade/{version}/stockquote
        versions:
          1:
            facade:
              parameters: /{symbol}
              contract: { symbol: string, price: number }
              sources:
                quotes: { backend: quotes, request: "/v1/quotes/{symbol}", format: json, fields: { symbol: /symbol, price: /currentPrice } }
              active: quotes
    # One signature replayed by the client: no nonce (the store's insert is the micro-benchmarks').
    signatures: { maxClockSkew: 1h, requireNonce: false }
    tiers:
      bench: { rate: 1000000000/s, burst: 1000000 }
    keys:
      bench: { secret: "\(benchSecret)", demo: true, services: [signedQuote], tier: bench }
    """
var logger = Logger(label: "portico.bench")
logger.logLevel = .warning
let gateway = Gateway(snapshot: try PolicyLoader().load(sources: [(file: "bench.yaml", text: policy)]), group: gatewayGroup, logger: logger)
try await gateway.start()
for loop in gatewayGroup.makeIterator() {
    try await loop.submit { malloc_counter_mark_thread() }.get()
}

struct Row {
    let name: String
    let all: Double
    let gateway: Double
    let gatewayReallocations: Double
    let gatewayFrees: Double
    let accesses: Double
    let casts: Double
}

/// Lets the last answer's write completions and callbacks run before the counters are read.
func settle() { usleep(50_000) }

func measure(_ name: String, _ client: BlockingHTTPClient, expecting expected: Int = 200) throws -> Row {
    for _ in 0..<warmUp { _ = try client.exchange() }
    settle()
    let all = malloc_counts_all()
    let marked = malloc_counts_marked()
    let runtime = runtime_counts_marked()
    for _ in 0..<requests {
        let status = try client.exchange()
        guard status == expected else { throw ClientError(description: "\(name): status \(status)") }
    }
    settle()
    let allAfter = malloc_counts_all()
    let markedAfter = malloc_counts_marked()
    let runtimeAfter = runtime_counts_marked()
    let perRequest = { (before: UInt64, after: UInt64) in Double(after - before) / Double(requests) }
    return Row(
        name: name, all: perRequest(all.allocations, allAfter.allocations),
        gateway: perRequest(marked.allocations, markedAfter.allocations),
        gatewayReallocations: perRequest(marked.reallocations, markedAfter.reallocations),
        gatewayFrees: perRequest(marked.frees, markedAfter.frees), accesses: perRequest(runtime.accesses, runtimeAfter.accesses),
        casts: perRequest(runtime.casts, runtimeAfter.casts))
}

/// With ACCESS_SITES=N in the environment: the N access sites that ran most during `body`, as
/// offsets in this executable with their counts per request (bench/allocations.sh symbolizes them).
func recordingSites(_ name: String, _ body: () throws -> Row) rethrows -> Row {
    guard let wanted = ProcessInfo.processInfo.environment["ACCESS_SITES"].flatMap(Int.init), wanted > 0 else { return try body() }
    runtime_counter_record_sites(1)
    let row = try body()
    runtime_counter_record_sites(0)
    var offsets = [UInt](repeating: 0, count: wanted)
    var counts = [UInt64](repeating: 0, count: wanted)
    let found = Int(runtime_counter_sites(&offsets, &counts, Int32(wanted)))
    for index in 0..<found {
        print("site \(name): 0x\(String(offsets[index], radix: 16)) \(format(Double(counts[index]) / Double(requests + warmUp)))")
    }
    return row
}

let path = "/api/1/stockquote/AAPL"
var rows = [try measure("direct to the backend", BlockingHTTPClient(stream: try PlainStream(port: backendPort), path: "/v1/quotes/AAPL"))]
/// ROUTE=open|signed|signed3p|open3p|facade|404|tls in the environment runs that route only after
/// the direct run (ROUTE=direct: none): bench/retains.sh counts the runtime's calls per route from outside.
let onlyRoute = ProcessInfo.processInfo.environment["ROUTE"]
func runs(_ route: String) -> Bool { onlyRoute == nil || onlyRoute == route }

let plainPort = gateway.boundPorts["plain"]!
if runs("open") {
    rows.append(
        try recordingSites("open") {
            try measure("through Portico, HTTP", BlockingHTTPClient(stream: try PlainStream(port: plainPort), path: path))
        })
}
// Signed once, as an app's RequestSigner signs (method, authority, path), replayed.
let signedPath = "/signed/1/stockquote/AAPL"
var signer = RequestSigner(keyID: "bench", secret: benchSecret)
signer.includesNonce = false
let signature = try signer.sign(method: "GET", url: URL(string: "http://localhost\(signedPath)")!)
if runs("signed") {
    rows.append(
        try measure(
            "signed (RFC 9421), HTTP", BlockingHTTPClient(stream: try PlainStream(port: plainPort), path: signedPath, headers: signature)))
}
// The shape third-party signers send (requests-http-signature's default, bench/auth.sh's): a GET
// with a query, covering `@method @authority @path @query date content-digest` (the digest of the
// empty body) with an `alg` parameter. "open3p" sends the open route the very same fields, so that
// the difference between the two is the work of checking them, not of carrying them.
let thirdPartyTarget = "/stockquote/AAPL?fields=price"
let thirdPartyFields: [(name: String, value: String)] = try {
    let now = Int64(Date().timeIntervalSince1970)
    let fields = [("Date", HTTPDate.format(now)), ("Content-Digest", "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:")]
    let request = HTTPRequestParts(
        method: "GET", scheme: "http", authority: "localhost", requestTarget: "/signed/1" + thirdPartyTarget,
        fields: [("host", "localhost")] + fields)
    let input = SignatureInput(
        components: [.method, .authority, .path, .query, .field("date"), .field("content-digest")], created: now, keyID: "bench",
        algorithm: MessageSignature.algorithm)
    let signed = try MessageSignature.sign(
        request, input: input, label: "sig1", authenticator: HMACSHA256Authenticator(key: Array(benchSecret.utf8)))
    return fields + [("Signature-Input", signed.signatureInput), ("Signature", signed.signature)]
}()
for (route, name, prefix) in [("signed3p", "signed, third-party shape", "/signed/1"), ("open3p", "open, the same fields", "/api/1")]
where runs(route) {
    rows.append(
        try recordingSites(route) {
            try measure(
                name,
                BlockingHTTPClient(stream: try PlainStream(port: plainPort), path: prefix + thirdPartyTarget, headers: thirdPartyFields))
        })
}
if runs("facade") {
    rows.append(
        try measure("facade, HTTP", BlockingHTTPClient(stream: try PlainStream(port: plainPort), path: "/facade/1/stockquote/AAPL")))
}
if runs("404") {
    rows.append(
        try measure("404 without a backend", BlockingHTTPClient(stream: try PlainStream(port: plainPort), path: "/nowhere"), expecting: 404))
}
if certificate != nil, runs("tls") {
    rows.append(try measure("through Portico, TLS", BlockingHTTPClient(stream: try TLSStream(port: gateway.boundPorts["tls"]!), path: path)))
}

func format(_ value: Double) -> String {
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}
func pad(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }

print("\(requests) requests per run (after \(warmUp) to warm up), one keep-alive connection each; per request")
print(
    "run".padding(26) + pad("all threads", 13) + pad("all − direct", 14) + pad("gateway", 10) + pad("reallocs", 10) + pad("frees", 8)
        + pad("accesses", 10) + pad("casts", 7))
for row in rows {
    let isDirect = row.name.hasPrefix("direct")
    let gatewayColumns =
        isDirect
        ? [String](repeating: "-", count: 6)
        : [row.all - rows[0].all, row.gateway, row.gatewayReallocations, row.gatewayFrees, row.accesses, row.casts].map(format)
    let widths = [14, 10, 10, 8, 10, 7]
    print(row.name.padding(26) + pad(format(row.all), 13) + zip(gatewayColumns, widths).map { pad($0, $1) }.joined())
}
print("gateway: allocations on the gateway's thread; accesses, casts: swift_beginAccess, and swift_dynamicCast with")
print("swift_dynamicCastClass, called there")

await gateway.shutdown(gracePeriod: .seconds(1))
try await backend.close().get()
try await gatewayGroup.shutdownGracefully()
try await backendGroup.shutdownGracefully()

extension String {
    fileprivate func padding(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}
