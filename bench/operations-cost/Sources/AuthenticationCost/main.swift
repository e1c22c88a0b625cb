// Prints the CPU time (this thread's, CLOCK_THREAD_CPUTIME_ID) the authenticate stage's check costs
// per request, for each kind of route `bench/auth.sh` serves: none, an API key, and an RFC 9421
// signature over the same six components (`@method @authority @path @query date content-digest`,
// created/keyid/alg, no nonce, so one head can be checked again and again). The head carries the
// same fields wrk sends there, in the same order, so the stage reads what it reads in the gateway.
// Several rounds; the median is printed with the others. Each kind's result is checked first: a
// check that refused the request would be timing an early return. Then the verification alone
// (`verify`), by both readings: in place, as the gateway reads this request, and the general one.
// `worst`: the most expensive signed heads an attacker without a key can send within the default
// limits (16 KiB of head, signatures.maxComponents 32, signatures.maxBaseBytes 8 KiB), each
// checked to be refused, against the signed route's genuine check.
import Foundation
import NIOHTTP1
import PorticoCrypto
import PorticoPolicy

@testable import Portico
@testable import PorticoSigning

func threadCPUNanos() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}

let checks = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 2_000_000
/// Optionally only some kinds (`signed`, …), e.g. to profile one.
let only = Set(CommandLine.arguments.dropFirst(2))
let rounds = 5
let secret = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
let apiSecret = "bench-api-key-secret-0123456789abcdefghijklmnop"
let now: Int64 = 1_800_000_000

let snapshot = try PolicyLoader().load(sources: [
    (
        file: "auth.yaml",
        text: """
        listeners: [{ name: bench, port: 0 }]
        backends: { quotes: { url: "http://127.0.0.1:1" } }
        signatures: { maxClockSkew: 1h, requireNonce: false }
        keys:
          bench: { secret: \(secret), demo: true, services: [open, keyed, signed] }
          other: { secret: \(apiSecret), demo: true, services: [keyed] }
        services:
          open: { path: "/open/{version}/stockquote", versions: { 1: { proxy: { backend: quotes } } } }
          keyed: { path: "/keyed/{version}/stockquote", auth: apiKey, versions: { 1: { proxy: { backend: quotes } } } }
          signed: { path: "/signed/{version}/stockquote", auth: signature, versions: { 1: { proxy: { backend: quotes } } } }
        """
    )
])
let compiled = CompiledPolicy(snapshot, metrics: GatewayMetrics())
let authenticator = RequestAuthenticator(compiled, nonces: InMemoryNonceStore(capacity: 1024), scheme: "https")

/// The head wrk sends to `route` in bench/auth.sh: every route gets the same fields.
func head(route: String) throws -> HTTPRequestHead {
    let authority = "localhost:18202"
    let target = "/signed/1/stockquote/AAPL?fields=price"
    let date = "Tue, 24 Nov 2026 10:00:00 GMT"
    let digest = "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"
    let input = SignatureInput(
        components: [.method, .authority, .path, .query, .field("date"), .field("content-digest")],
        created: now, keyID: "bench", algorithm: "hmac-sha256")
    let request = HTTPRequestParts(
        method: "GET", scheme: "https", authority: authority, requestTarget: target,
        fields: [("host", authority), ("date", date), ("content-digest", digest)])
    let signed = try MessageSignature.sign(request, input: input, label: "sig1", authenticator: OpenSSLHMACKey(key: Array(secret.utf8))!)
    var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.replacingOccurrences(of: "/signed/", with: "/\(route)/"))
    head.headers.add(name: "Host", value: authority)
    head.headers.add(name: "Date", value: date)
    head.headers.add(name: "Content-Digest", value: digest)
    head.headers.add(name: "X-API-Key", value: "other.\(apiSecret)")
    head.headers.add(name: "Signature-Input", value: signed.signatureInput)
    head.headers.add(name: "Signature", value: signed.signature)
    return head
}

/// Median CPU ns per call of `body` over the rounds, and the rounds.
func measure(_ body: () -> Bool) -> (median: Double, rounds: [Double]) {
    var perCall: [Double] = []
    var failures = 0
    for _ in 0..<rounds {
        let start = threadCPUNanos()
        for _ in 0..<checks where !body() { failures += 1 }
        perCall.append(Double(threadCPUNanos() - start) / Double(checks))
    }
    guard failures == 0 else { fatalError("\(failures) calls failed") }
    return (perCall.sorted()[rounds / 2], perCall)
}

func report(_ name: String, _ result: (median: Double, rounds: [Double])) {
    let rendered = result.rounds.map { String(format: "%.0f", $0) }.joined(separator: " ")
    print("\(name): median \(String(format: "%.0f", result.median)) ns CPU per check (rounds: \(rendered) ns)")
}

// The verification alone, both readings, over the signed route's fields: the in-place reading the
// gateway takes (SignatureView), and the general one it falls back to (select + verify), each
// computing the two MACs every verification costs.
if only.isEmpty || only.contains("verify") {
    let signed = try head(route: "signed")
    let fields = SignatureHeadFields(signed.headers, clientVersionHeader: "x-client-version", clientPlatformHeader: "x-client-platform")
    let input = fields.signatureInput!
    let signature = fields.signature!
    let request = SignableRequestHead(head: signed, scheme: "https", host: fields.host)
    let key = OpenSSLHMACKey(key: Array(secret.utf8))!
    let standIn = OpenSSLHMACKey(key: Array("a-stand-in-for-the-previous-secret-0123456789".utf8))!
    report(
        "verify in place (SignatureView: read, base, 2 MACs)",
        measure {
            var view = SignatureView(signatureInput: input)
            return view.read(label: nil, signature: signature) && view.verify(request: request, candidates: key, standIn)?.first == true
        })
    report(
        "verify, general reading (select, base, 2 MACs)",
        measure {
            let parsed = try! SignatureFields.select(label: nil, signatureInput: input, signature: signature)
            return (try! MessageSignature.verify(parsed, request: request, candidates: key, standIn)).first
        })
}

for route in ["open", "keyed", "signed"] where only.isEmpty || only.contains(route) {
    let service = snapshot.policy.services[route]!
    // As the authenticate stage does: a service without `auth` is not checked at all.
    guard let scheme = service.auth.first else {
        print("\(route): auth: none, nothing is checked")
        continue
    }
    // The signed head is built for /signed/…; the others only change the route's name, which the
    // signature does not have to cover for them.
    let request = try head(route: route == "signed" ? "signed" : route)
    guard case .success(let authentication) = authenticator.authenticate(request, scheme: scheme, service: service, hasBody: false, now: now) else {
        fatalError("the \(route) request is refused")
    }
    guard route == "open" || authentication.keyID != nil else { fatalError("the \(route) request has no key") }
    var perCheck: [Double] = []
    var accepted = 0
    for _ in 0..<rounds {
        let start = threadCPUNanos()
        for _ in 0..<checks {
            if case .success = authenticator.authenticate(request, scheme: scheme, service: service, hasBody: false, now: now) { accepted += 1 }
        }
        perCheck.append(Double(threadCPUNanos() - start) / Double(checks))
    }
    guard accepted == rounds * checks else { fatalError("\(route): \(rounds * checks - accepted) checks refused") }
    let sorted = perCheck.sorted()
    let rendered = perCheck.map { String(format: "%.0f", $0) }.joined(separator: " ")
    print("\(route): median \(String(format: "%.0f", sorted[rounds / 2])) ns CPU per check (rounds: \(rendered) ns)")
}

// The worst heads within the default limits, from a client with no key (keyid "nobody", a MAC of
// zeros): each must be refused, and costs what it costs to refuse. `checks / 1000` per round.
if only.isEmpty || only.contains("worst") || only.contains(where: { $0.hasPrefix("worst") }) {
    let service = snapshot.policy.services["signed"]!
    let scheme = AuthScheme.signature
    let common = try head(route: "signed")
    let authority = "localhost:18202"
    let zeros = "sig1=:" + Data(count: 32).base64EncodedString() + ":"
    func forged(target: String, input: String, fields: [(String, String)] = []) -> HTTPRequestHead {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target)
        head.headers.add(name: "Host", value: authority)
        for (name, value) in fields { head.headers.add(name: name, value: value) }
        head.headers.add(name: "Signature-Input", value: input)
        head.headers.add(name: "Signature", value: zeros)
        return head
    }
    func input(_ components: [String]) -> String {
        "sig1=(" + components.joined(separator: " ") + ");created=\(now);keyid=\"nobody\""
    }
    let query = (0..<700).map { "p\($0)=\($0)" }.joined(separator: "&")
    let target = "/signed/1/stockquote/AAPL?" + query
    let plain = ["\"@method\"", "\"@authority\"", "\"@path\"", "\"@query\""]
    let dictionary = (0..<900).map { "m\($0)=\($0)" }.joined(separator: ", ")
    let heads: [(String, HTTPRequestHead)] = [
        (
            "the issue's head: 700 query parameters, 300 @query-param covered (refused at 32 components)",
            forged(target: target, input: input(plain + (0..<300).map { "\"@query-param\";name=\"p\($0)\"" }))
        ),
        (
            "700 query parameters, 28 @query-param covered (32 components: base and 2 MACs)",
            forged(target: target, input: input(plain + (0..<28).map { "\"@query-param\";name=\"p\($0 * 25)\"" }))
        ),
        (
            "an 8 KiB dictionary field of 900 members, 28 of them covered by ;key=",
            forged(
                target: "/signed/1/stockquote/AAPL", input: input(plain.dropLast() + (0..<29).map { "\"x-dict\";key=\"m\($0 * 31)\"" }),
                fields: [("X-Dict", dictionary)])
        ),
        (
            "a 7.9 KiB field covered: the base just under maxBaseBytes, 2 MACs over it",
            forged(
                target: "/signed/1/stockquote/AAPL", input: input(plain.dropLast() + ["\"x-big\""]),
                fields: [("X-Big", String(repeating: "b", count: 7900))])
        ),
        (
            "a 14 KiB Signature-Input of 800 members (refused at the 65th)",
            forged(
                target: "/signed/1/stockquote/AAPL",
                input: input(plain.dropLast()) + ", " + (0..<800).map { "s\($0)=(\"@method\")" }.joined(separator: ", "))
        ),
        (
            "one component with 2,000 parameters (14 KiB)",
            forged(
                target: "/signed/1/stockquote/AAPL",
                input: input(plain.dropLast() + ["\"@path\"" + (0..<2000).map { ";q\($0)" }.joined()]))
        ),
    ]
    let worstChecks = max(1, checks / 1000)
    // `worst3` times the third head alone (e.g. to profile it): the common check then gets fewer rounds.
    func perCheck(_ request: HTTPRequestHead, count: Int, expectRefusal: Bool) -> Double {
        var times: [Double] = []
        for _ in 0..<rounds {
            let start = threadCPUNanos()
            for _ in 0..<count {
                let result = authenticator.authenticate(request, scheme: scheme, service: service, hasBody: false, now: now)
                if case .success = result, expectRefusal { fatalError("a forged head was admitted") }
                if case .failure(let problem) = result, !expectRefusal { fatalError("the common head was refused: \(problem)") }
            }
            times.append(Double(threadCPUNanos() - start) / Double(count))
        }
        return times.sorted()[rounds / 2]
    }
    let chosen = only.compactMap { $0.hasPrefix("worst") ? Int($0.dropFirst(5)) : nil }
    let baseline = perCheck(common, count: chosen.isEmpty ? checks : max(1, checks / 1000), expectRefusal: false)
    print("common signed check: median \(String(format: "%.0f", baseline)) ns CPU")
    for (index, (name, request)) in heads.enumerated() where chosen.isEmpty || chosen.contains(index + 1) {
        let bytes = request.headers.reduce(request.uri.utf8.count) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        guard case .failure(let problem) = authenticator.authenticate(request, scheme: scheme, service: service, hasBody: false, now: now) else {
            fatalError("\(name): admitted")
        }
        let cost = perCheck(request, count: worstChecks, expectRefusal: true)
        print(
            "\(name) [\(bytes) bytes of head, \(problem.status.code) \(problem.type.dropFirst(20))]: median "
                + "\(String(format: "%.0f", cost)) ns CPU, \(String(format: "%.1f", cost / baseline))x the common check")
    }
}
