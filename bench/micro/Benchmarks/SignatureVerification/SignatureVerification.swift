import Benchmark
import Foundation
import Portico
import PorticoCrypto
import PorticoSigning
import RawStructuredFieldValues

/// What the gateway's authenticate stage spends on one signed request, piece by piece.
let benchmarks: @Sendable () -> Void = {
    // Each sample times 1,000 iterations (rows marked * are per iteration): one verification is a
    // couple of microseconds, and timing each alone added the harness's own clock reads and
    // bookkeeping to every sample, and its allocations (about 17) to the malloc column.
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput], scalingFactor: .kilo, maxDuration: .seconds(3))

    let secret = Array("demo-only-secret-published-in-the-portico-repository".utf8)
    let key = OpenSSLHMACKey(key: secret)!
    let request = HTTPRequestParts(
        method: "GET", scheme: "https", authority: "api.example.com", requestTarget: "/api/1/stockquote/AAPL?fields=price",
        fields: [("host", "api.example.com"), ("x-client-version", "2.4.1"), ("accept", "application/json")])
    let input = SignatureInput(
        components: [.method, .authority, .path, .query, .field("x-client-version")], created: 1_795_000_000,
        nonce: "6c0d3f0e-3b5a-4a7e-9d53-1f1c2a9b8e77", keyID: "demo-app")
    let signed = try! MessageSignature.sign(request, input: input, authenticator: key)

    // What the gateway does per signed request: parse both fields, build the base once, compute the
    // two MACs every verification costs (current secret and previous one, or stand-ins), compare.
    let standIn = OpenSSLHMACKey(key: Array("a-stand-in-for-the-previous-secret-of-the-key".utf8))!
    Benchmark(
        "verify: parse fields + build base + 2 HMACs + compare (the general reading; the gateway reads this shape in place first: bench/auth-cost.sh)"
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            let signature = try! SignatureFields.select(label: nil, signatureInput: signed.signatureInput, signature: signed.signature)
            blackHole(try! MessageSignature.verify(signature, request: request, candidates: key, standIn))
        }
    }

    // The same, timed alone: counting mallocs goes through an interposer on every allocation, which
    // adds to the wall clock of the benchmarks that count them.
    Benchmark(
        "verify, wall clock only: parse fields + build base + 2 HMACs + compare",
        configuration: .init(metrics: [.wallClock, .throughput], scalingFactor: .kilo)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            let signature = try! SignatureFields.select(label: nil, signatureInput: signed.signatureInput, signature: signed.signature)
            blackHole(try! MessageSignature.verify(signature, request: request, candidates: key, standIn))
        }
    }

    Benchmark("verify: parse fields + build base + 1 HMAC + compare") { benchmark in
        for _ in benchmark.scaledIterations {
            let signature = try! SignatureFields.select(label: nil, signatureInput: signed.signatureInput, signature: signed.signature)
            blackHole(try! MessageSignature.verify(signature, request: request, authenticator: key))
        }
    }

    // For comparison: the library's parser, which the verifier no longer uses (see StructuredDictionary).
    Benchmark("swift-http-structured-headers: parse the Signature-Input dictionary alone") { benchmark in
        for _ in benchmark.scaledIterations {
            var parser = StructuredFieldValueParser(Array(signed.signatureInput.utf8))
            blackHole(try! parser.parseDictionaryFieldValue())
        }
    }

    Benchmark("parse Signature-Input and Signature") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try! SignatureFields.select(label: nil, signatureInput: signed.signatureInput, signature: signed.signature))
        }
    }

    let parsed = try! SignatureFields.select(label: nil, signatureInput: signed.signatureInput, signature: signed.signature)
    Benchmark("build the signature base") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try! SignatureBase.make(for: parsed.input, request: request))
        }
    }

    Benchmark("serialise the @signature-params value") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try! parsed.input.serialized())
        }
    }

    let base = try! SignatureBase.make(for: parsed.input, request: request)
    Benchmark("HMAC-SHA256 of the base (OpenSSL)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(key.authenticationCode(for: base))
        }
    }

    let nonces = InMemoryNonceStore(capacity: 10_000_000)
    Benchmark("nonce store insert (in memory, 16 shards)") { benchmark in
        var counter = 0
        for _ in benchmark.scaledIterations {
            counter += 1
            blackHole(nonces.insert(keyID: "demo-app", nonce: "nonce-\(counter)", created: 1_795_000_000, expiry: 2_000_000_000, now: 1_795_000_000, quota: .max))
        }
    }

    let body = [UInt8](repeating: 0x61, count: 1024)
    Benchmark("Content-Digest check of a 1 KiB body (sha-256)") { benchmark in
        let digest = body.withUnsafeBytes { ContentDigest.value(for: $0, using: OpenSSLDigest()) }
        for _ in benchmark.scaledIterations {
            blackHole(try! body.withUnsafeBytes { try ContentDigest.verify(digest, body: $0, using: OpenSSLDigest()) })
        }
    }
}
