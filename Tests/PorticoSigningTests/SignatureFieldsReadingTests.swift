import Foundation
import RawStructuredFieldValues
import Testing

@testable import PorticoSigning

/// `SignatureFields.select` reads the chosen members straight into a `SignatureInput` and the
/// signature's bytes. Here it is checked against the plain reading it replaced: parse both fields
/// into dictionaries, pick the members, convert them. On generated and mutated field pairs, the two
/// must accept the same ones with the same result (the same `@signature-params` text included, so a
/// canonical text kept from the field is right) and refuse the others with the same error.
@Suite struct SignatureFieldsReadingTests {
    typealias SplitMix = SignaturePropertyTests.SplitMix

    // MARK: Generation

    static let labels = ["sig1", "sig2", "sig-b21", "a"]
    static let componentNames = [
        "@method", "@authority", "@path", "@query", "@target-uri", "@query-param", "content-digest", "date", "x-client-version",
        "@Method", "", "Date",
    ]

    static func component(_ random: inout SplitMix) -> String {
        // Mostly names a verifier accepts; now and then an uppercase or empty one.
        let names = Int.random(in: 0..<6, using: &random) == 0 ? componentNames : Array(componentNames.prefix(9))
        let name = "\"" + names.randomElement(using: &random)! + "\""
        switch Int.random(in: 0..<12, using: &random) {
        case 0: return name + ";key=\"sha-256\""
        case 1: return name + ";bs"
        case 2: return name + ";name=\"q\""
        case 3: return StructuredDictionaryTests.bareItem(&random)  // not a string at all
        default: return name
        }
    }

    static func signatureParameters(_ random: inout SplitMix) -> String {
        var parameters = [";created=1700000000", ";keyid=\"k\"", ";nonce=\"n-1\"", ";alg=\"hmac-sha256\"", ";expires=1700000300"]
        parameters.shuffle(using: &random)
        var chosen = Array(parameters.prefix(Int.random(in: 0...5, using: &random)))
        switch Int.random(in: 0..<10, using: &random) {
        case 0: chosen.append(";created=\"soon\"")
        case 1: chosen.append(";tag=7")
        case 2: chosen.append(StructuredDictionaryTests.parameters(&random))
        case 3: chosen.append(";keyid=\"other\"")  // repeated: the last value in the first place
        default: break
        }
        return chosen.joined()
    }

    static func inputMember(_ label: String, _ random: inout SplitMix) -> String {
        switch Int.random(in: 0..<12, using: &random) {
        case 0: return label + "=" + StructuredDictionaryTests.bareItem(&random)  // not an inner list
        case 1: return label + StructuredDictionaryTests.parameters(&random)  // a bare true
        default:
            let components = (0..<Int.random(in: 0...5, using: &random)).map { _ in component(&random) }
            let separator = Int.random(in: 0..<8, using: &random) == 0 ? "  " : " "
            return label + "=(" + components.joined(separator: separator) + ")" + signatureParameters(&random)
        }
    }

    static func signatureMember(_ label: String, _ random: inout SplitMix) -> String {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return label + "=" + StructuredDictionaryTests.bareItem(&random)
        case 1: return label + "=(:AAAA:)"
        case 2: return label + "=:YQ=:;p=1"
        default:
            let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
            return label + "=:" + Data(bytes).base64EncodedString() + ":"
        }
    }

    /// Members under the pair's own labels, each once, now and then with another label or a
    /// repeated one; rarely none at all.
    static func field(_ labels: [String], _ member: (String, inout SplitMix) -> String, _ random: inout SplitMix) -> String {
        var chosen = Int.random(in: 0..<12, using: &random) == 0 ? [] : labels
        if Int.random(in: 0..<5, using: &random) == 0 { chosen.append(Self.labels.randomElement(using: &random)!) }
        if Int.random(in: 0..<10, using: &random) == 0, let any = labels.randomElement(using: &random) { chosen.append(any) }
        return chosen.map { member($0, &random) }.joined(separator: [", ", ",", " , "].randomElement(using: &random)!)
    }

    @Test("agrees with the dictionary reading on 20,000 generated and mutated field pairs", arguments: 0..<4)
    func agreesWithTheDictionaryReading(seed: UInt64) {
        var random = SplitMix(state: 0x51C_0000 &+ seed &* 7_919)
        var accepted = 0
        var refusals: Set<String> = []
        for round in 0..<5_000 {
            let labels = Array(Self.labels.shuffled(using: &random).prefix(Int.random(in: 1...2, using: &random)))
            var input = Self.field(labels, Self.inputMember, &random)
            var signature = Self.field(labels, Self.signatureMember, &random)
            switch round % 4 {
            case 1: input = StructuredDictionaryTests.mutated(input, &random)
            case 2: signature = StructuredDictionaryTests.mutated(signature, &random)
            default: break
            }
            let label = Bool.random(using: &random) ? nil : labels.randomElement(using: &random)!
            let expected = Result { () throws(SigningError) in
                try SignatureFields.dictionaryReading(label: label, signatureInput: input, signature: signature)
            }
            let actual = Result { () throws(SigningError) in
                try SignatureFields.select(label: label, signatureInput: input, signature: signature)
            }
            switch (actual, expected) {
            case (.success(let ours), .success(let theirs)):
                accepted += 1
                #expect(ours.label == theirs.label && ours.input == theirs.input && ours.value == theirs.value, "\(input) / \(signature)")
                #expect((try? ours.input.serialized()) == (try? theirs.input.serialized()), "@signature-params of \(input)")
            case (.failure(let ours), .failure(let theirs)):
                #expect(ours == theirs, "\(input) / \(signature) with label \(label ?? "nil")")
                refusals.insert("\(theirs)".prefix(24).description)
            default:
                Issue.record(
                    "one reading accepts, the other refuses \(input) / \(signature), label \(label ?? "nil"): \(actual) vs \(expected)")
            }
        }
        // Both outcomes, and many kinds of refusal, were exercised.
        #expect(accepted > 300, "accepted only \(accepted)")
        #expect(refusals.count > 10, "refusals seen: \(refusals.sorted())")
    }

    @Test("the canonical text of the chosen member is used only when it is canonical")
    func canonicalText() throws {
        let signature = "sig1=:AAAA:"
        for (member, serialized) in [
            (#"("@method" "date");created=1;keyid="k""#, #"("@method" "date");created=1;keyid="k""#),
            (#"( "@method"  "date" );created=01;keyid="k""#, #"("@method" "date");created=1;keyid="k""#),
            (#"("@method");keyid="k";created=1;x=?1"#, #"("@method");keyid="k";created=1;x"#),
        ] {
            let read = try SignatureFields.select(label: nil, signatureInput: "sig1=" + member, signature: signature)
            #expect(try read.input.serialized() == serialized, "\(member)")
        }
    }
}
