import Foundation
import PorticoCrypto
import PorticoSigning
import RawStructuredFieldValues
import Testing

/// Random requests signed over random sets of components verify; changing any single byte of any
/// covered part makes them fail.
@Suite struct SignaturePropertyTests {
    /// A small deterministic generator, so a failure can be replayed from its seed.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~%")

    static func word(_ random: inout SplitMix, _ range: ClosedRange<Int> = 1...12) -> String {
        String((0..<Int.random(in: range, using: &random)).map { _ in alphabet.randomElement(using: &random)! }.filter { $0 != "%" })
    }

    /// A request and the components its signature covers.
    static func randomCase(_ random: inout SplitMix) -> (HTTPRequestParts, [ComponentIdentifier]) {
        let method = ["GET", "POST", "PUT", "DELETE", "PATCH"].randomElement(using: &random)!
        let path = "/" + (0..<Int.random(in: 1...4, using: &random)).map { _ in word(&random) }.joined(separator: "/")
        var query: [(String, String)] = []
        for _ in 0..<Int.random(in: 0...3, using: &random) { query.append(("q" + word(&random, 1...4), word(&random, 0...8))) }
        let target = path + (query.isEmpty ? "" : "?" + query.map { "\($0.0)=\($0.1)" }.joined(separator: "&"))
        var fields: [(name: String, value: String)] = [("host", "api.example.com")]
        for index in 0..<Int.random(in: 0...4, using: &random) { fields.append(("x-field-\(index)", word(&random))) }
        let request = HTTPRequestParts(method: method, scheme: "https", authority: "api.example.com", requestTarget: target, fields: fields)

        var pool: [ComponentIdentifier] = [.method, .authority, .path, .targetURI, .requestTarget, .scheme, .query]
        pool += fields.dropFirst().map { .field($0.name) }
        var seen = Set<String>()
        for (name, _) in query where seen.insert(name).inserted { pool.append(.queryParameter(name)) }
        let covered = pool.filter { _ in Bool.random(using: &random) }
        return (request, covered.isEmpty ? [.method] : covered)
    }

    /// Every variant of `request` with one byte of one covered part changed.
    static func tamperings(_ request: HTTPRequestParts, covered: [ComponentIdentifier]) -> [(String, HTTPRequestParts)] {
        func flipped(_ text: String, at index: Int) -> String {
            var bytes = Array(text.utf8)
            // Stay within visible ASCII so the change is a different value, not an unsignable one.
            bytes[index] = bytes[index] == UInt8(ascii: "z") ? UInt8(ascii: "y") : UInt8(ascii: "z")
            return String(decoding: bytes, as: UTF8.self)
        }
        var variants: [(String, HTTPRequestParts)] = []
        let names = Set(covered.map(\.name))
        if names.contains("@method") {
            for index in request.method.utf8.indices.map({ request.method.utf8.distance(from: request.method.utf8.startIndex, to: $0) }) {
                var copy = request
                copy.method = flipped(request.method, at: index)
                variants.append(("method byte \(index)", copy))
            }
        }
        if !names.isDisjoint(with: ["@path", "@query", "@request-target", "@target-uri", "@query-param"]) {
            for index in 0..<request.requestTarget.utf8.count {
                var copy = request
                copy.requestTarget = flipped(request.requestTarget, at: index)
                // A change that leaves every covered value identical (e.g. in an uncovered query
                // parameter) is not tampering with a covered part.
                let before = covered.map { try? SignatureBase.componentValue($0, request: request) }
                let after = covered.map { try? SignatureBase.componentValue($0, request: copy) }
                if before != after { variants.append(("target byte \(index)", copy)) }
            }
        }
        if names.contains("@authority") || names.contains("@target-uri") {
            for index in 0..<request.authority.utf8.count {
                var copy = request
                copy.authority = flipped(request.authority, at: index)
                variants.append(("authority byte \(index)", copy))
            }
        }
        for (position, field) in request.fields.enumerated() where names.contains(field.name) {
            for index in 0..<field.value.utf8.count {
                var copy = request
                copy.fields[position].value = flipped(field.value, at: index)
                variants.append(("\(field.name) byte \(index)", copy))
            }
        }
        return variants
    }

    @Test(arguments: 0..<8)
    func randomSignaturesVerifyAndEveryCoveredByteMatters(seed: UInt64) throws {
        var random = SplitMix(state: seed &* 7919)
        for _ in 0..<25 {
            let (request, covered) = Self.randomCase(&random)
            let secret = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
            let key = try #require(OpenSSLHMACKey(key: secret))
            let input = SignatureInput(components: covered, created: 1_700_000_000, nonce: Self.word(&random), keyID: "k")
            let signed = try MessageSignature.sign(request, input: input, authenticator: key)
            let parsed = try SignatureFields.select(label: nil, signatureInput: signed.signatureInput, signature: signed.signature)
            #expect(parsed.input == input)
            #expect(try MessageSignature.verify(parsed, request: request, authenticator: key), "\(request.requestTarget) \(covered)")

            for (what, variant) in Self.tamperings(request, covered: covered) {
                let verified = (try? MessageSignature.verify(parsed, request: variant, authenticator: key)) ?? false
                #expect(!verified, "changing \(what) of \(request.method) \(request.requestTarget) went unnoticed (covered: \(covered))")
            }
            // And one byte of the signature itself, or of its parameters.
            var signature = parsed
            signature.value[Int.random(in: 0..<signature.value.count, using: &random)] ^= 0x01
            #expect(try !MessageSignature.verify(signature, request: request, authenticator: key))
            var parameters = parsed
            parameters.input.parameters[0].value = .integer(1_700_000_001)
            #expect(try !MessageSignature.verify(parameters, request: request, authenticator: key))
        }
    }

    @Test(
        "10,000 seeded cases: each verifies under its key as either candidate, and a changed byte of its fields or request is caught",
        arguments: 0..<8)
    func seededMutations(seed: UInt64) throws {
        var random = SplitMix(state: 0xC0FF_EE00 &+ seed &* 104_729)
        for round in 0..<1_250 {
            let (request, covered) = Self.randomCase(&random)
            let key = try #require(OpenSSLHMACKey(key: (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }))
            let other = try #require(OpenSSLHMACKey(key: (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }))
            let input = SignatureInput(components: covered, created: 1_700_000_000, nonce: Self.word(&random), keyID: "k")
            let signed = try MessageSignature.sign(request, input: input, authenticator: key)
            let parsed = try SignatureFields.select(label: nil, signatureInput: signed.signatureInput, signature: signed.signature)

            // Both MACs are always computed; only the one under the signing key matches.
            let asFirst = try MessageSignature.verify(parsed, request: request, candidates: key, other)
            let asSecond = try MessageSignature.verify(parsed, request: request, candidates: other, key)
            let neither = try MessageSignature.verify(parsed, request: request, candidates: other, other)
            #expect(asFirst.first && !asFirst.second && !asSecond.first && asSecond.second && !neither.first && !neither.second)

            // One byte of either field replaced, inserted or removed: refused, unless it still reads as
            // exactly what was signed (a space the grammar allows, say).
            var inputText = signed.signatureInput
            var signatureText = signed.signature
            if Bool.random(using: &random) {
                inputText = StructuredDictionaryTests.mutated(inputText, &random)
            } else {
                signatureText = StructuredDictionaryTests.mutated(signatureText, &random)
            }
            if let changed = try? SignatureFields.select(label: nil, signatureInput: inputText, signature: signatureText),
                (try? MessageSignature.verify(changed, request: request, authenticator: key)) == true
            {
                #expect(changed.input == parsed.input && changed.value == parsed.value, "accepted \(inputText) / \(signatureText)")
            }

            // Every tenth case, one covered byte of the request itself.
            if round % 10 == 0, let (what, variant) = Self.tamperings(request, covered: covered).randomElement(using: &random) {
                let verified = (try? MessageSignature.verify(parsed, request: variant, authenticator: key)) ?? false
                #expect(!verified, "changing \(what) of \(request.method) \(request.requestTarget) went unnoticed")
            }
        }
    }
}
