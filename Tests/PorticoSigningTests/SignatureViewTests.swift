import Foundation
import PorticoCrypto
import Testing

@testable import PorticoSigning

/// `SignatureView` reads the common shape of signature in place and answers only where it can; the
/// general reading (`SignatureFields.select`, `MessageSignature.verify`) answers everything. Where
/// the view answers, the two must agree exactly: the same parameters and the same two MAC results.
@Suite struct SignatureViewTests {
    typealias SplitMix = SignaturePropertyTests.SplitMix

    /// The view's answer for one pair of fields over `request`: nil where it leaves the case to the
    /// general reading.
    static func viewAnswer(
        label: String?, input: String, signature: String, request: HTTPRequestParts, _ first: OpenSSLHMACKey, _ second: OpenSSLHMACKey
    ) -> (keyID: String?, created: Int64?, expires: Int64?, nonce: String?, matches: (first: Bool, second: Bool))? {
        guard let view = SignatureView.read(label: label, signatureInput: input, signature: signature),
            let matches = view.verify(request: request, candidates: first, second)
        else { return nil }
        return (view.keyID, view.created, view.expires, view.nonce, matches)
    }

    @Test("where it answers, it agrees with the general reading: 10,000 signed, mutated and tampered cases", arguments: 0..<4)
    func agreesWithTheGeneralReading(seed: UInt64) throws {
        var random = SplitMix(state: 0x5EE_0000 &+ seed &* 7_907)
        var answered = 0
        var matched = 0
        var leftToGeneral = 0
        for round in 0..<2_500 {
            var (request, covered) = SignaturePropertyTests.randomCase(&random)
            if Int.random(in: 0..<4, using: &random) == 0 {
                request.fields.append(("content-digest", "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"))
                covered.append(.field("content-digest"))
            }
            let key = try #require(OpenSSLHMACKey(key: (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }))
            let other = try #require(OpenSSLHMACKey(key: (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }))
            let expires: Int64? = Bool.random(using: &random) ? 1_700_000_300 : nil
            let nonce: String? = Bool.random(using: &random) ? SignaturePropertyTests.word(&random) : nil
            let input = SignatureInput(
                components: covered, created: 1_700_000_000, expires: expires, nonce: nonce, keyID: "k",
                algorithm: Bool.random(using: &random) ? MessageSignature.algorithm : nil)
            // (The signer refuses a few generated cases: a query parameter covered alone but repeated.)
            guard let signed = try? MessageSignature.sign(request, input: input, authenticator: key) else { continue }
            var inputText = signed.signatureInput
            var signatureText = signed.signature
            switch round % 6 {
            case 1: inputText = StructuredDictionaryTests.mutated(inputText, &random)
            case 2: signatureText = StructuredDictionaryTests.mutated(signatureText, &random)
            case 3:
                if let (_, variant) = SignaturePropertyTests.tamperings(request, covered: covered).randomElement(using: &random) {
                    request = variant
                }
            case 4:
                let labels = ["sig1"]
                inputText = SignatureFieldsReadingTests.field(labels, SignatureFieldsReadingTests.inputMember, &random)
                signatureText = SignatureFieldsReadingTests.field(labels, SignatureFieldsReadingTests.signatureMember, &random)
            default: break
            }
            let label: String? = Bool.random(using: &random) ? nil : "sig1"
            guard let answer = Self.viewAnswer(label: label, input: inputText, signature: signatureText, request: request, key, other)
            else {
                leftToGeneral += 1
                continue
            }
            answered += 1
            let general: SignatureFields.Signature
            do {
                general = try SignatureFields.select(label: label, signatureInput: inputText, signature: signatureText)
            } catch {
                Issue.record("the view read what the general reading refuses (\(error)): \(inputText) / \(signatureText)")
                continue
            }
            #expect(answer.keyID == general.input.keyID && answer.created == general.input.created, "\(inputText)")
            #expect(answer.expires == general.input.expires && answer.nonce == general.input.nonce, "\(inputText)")
            do {
                let base = try SignatureBase.make(for: general.input, request: request)
                #expect(
                    SignatureView.read(label: label, signatureInput: inputText, signature: signatureText)?.base(request: request)
                        == Array(base.utf8), "the base of \(inputText)")
                let expected = try MessageSignature.verify(general, request: request, candidates: key, other)
                #expect(answer.matches == expected, "\(inputText) / \(signatureText) over \(request.method) \(request.requestTarget)")
                if expected.first { matched += 1 }
            } catch {
                Issue.record("the view built a base the general reading refuses (\(error)): \(inputText) over \(request.requestTarget)")
            }
        }
        // The view answered many cases, genuine ones among them, and left the rest (mutations,
        // `@query-param`, other shapes) to the general reading. (About a quarter of the generated
        // cases are of the shape it reads, and three in five of those genuine.)
        #expect(answered > 400, "answered \(answered)")
        #expect(matched > 200, "genuine signatures answered \(matched)")
        #expect(leftToGeneral > 200, "left to the general reading \(leftToGeneral)")
    }

    @Test("a signature of the common shape is read in place, under either label rule")
    func commonShapeIsReadInPlace() throws {
        let request = HTTPRequestParts(
            method: "GET", scheme: "https", authority: "api.example.com:443", requestTarget: "/quotes/AAPL?fields=price",
            fields: [("host", "api.example.com:443"), ("date", "Tue, 24 Nov 2026 10:00:00 GMT")])
        let key = try #require(OpenSSLHMACKey(key: Array("the-secret-of-the-view-test-0123456789".utf8)))
        let decoy = try #require(OpenSSLHMACKey(key: Array("a-decoy-secret-0123456789abcdefghijkl".utf8)))
        let input = SignatureInput(
            components: [.method, .authority, .path, .query, .targetURI, .scheme, .requestTarget, .field("date")], created: 1_700_000_000,
            nonce: "n-1", keyID: "app", algorithm: MessageSignature.algorithm, tag: "portico")
        let signed = try MessageSignature.sign(request, input: input, authenticator: key)
        for label in [nil, "sig1"] {
            let answer = try #require(
                Self.viewAnswer(label: label, input: signed.signatureInput, signature: signed.signature, request: request, key, decoy))
            #expect(answer.keyID == "app" && answer.created == 1_700_000_000 && answer.nonce == "n-1" && answer.expires == nil)
            #expect(answer.matches.first && !answer.matches.second)
            let swapped = try #require(
                Self.viewAnswer(label: label, input: signed.signatureInput, signature: signed.signature, request: request, decoy, key))
            #expect(!swapped.matches.first && swapped.matches.second)
        }
    }

    @Test("every other shape is left to the general reading")
    func otherShapesAreLeftToTheGeneralReading() throws {
        let request = HTTPRequestParts(
            method: "GET", scheme: "https", authority: "api.example.com", requestTarget: "/a?q=1",
            fields: [("host", "api.example.com"), ("date", "today"), ("date", "tomorrow"), ("x-bin", "caf\u{e9}")])
        let key = try #require(OpenSSLHMACKey(key: Array("the-secret-of-the-view-test-0123456789".utf8)))
        let mac = ":" + Data(repeating: 7, count: 32).base64EncodedString() + ":"
        let long = "\"x-" + String(repeating: "a", count: 1_100) + "\""
        let cases: [(input: String, signature: String)] = [
            (#"sig1=( "@method");created=1;keyid="k""#, "sig1=" + mac),  // not canonical
            (#"sig1=("@method");created=01;keyid="k""#, "sig1=" + mac),  // not canonical
            (#"sig1=("@query-param";name="q");created=1;keyid="k""#, "sig1=" + mac),  // a component with parameters
            (#"sig1=("content-digest";sf);created=1;keyid="k""#, "sig1=" + mac),
            (#"sig1=("@Method");created=1;keyid="k""#, "sig1=" + mac),  // uppercase
            (#"sig1=("x-\"q");created=1;keyid="k""#, "sig1=" + mac),  // an escape
            (#"sig1=("@method" "@method");created=1;keyid="k""#, "sig1=" + mac),  // covered twice
            (#"sig1=("date" "date");created=1;keyid="k""#, "sig1=" + mac),
            (#"sig1=("@status");created=1;keyid="k""#, "sig1=" + mac),  // not a request component
            (#"sig1=("@signature-params");created=1;keyid="k""#, "sig1=" + mac),
            (#"sig1=("@method");created=1;keyid="k";keyid="j""#, "sig1=" + mac),  // a repeated parameter
            (#"sig1=("@method");created="1";keyid="k""#, "sig1=" + mac),  // mistyped
            (#"sig1=("@method");created=1;keyid=k"#, "sig1=" + mac),
            (#"sig1=("@method");created=1;keyid="k";alg="rsa-pss-sha512""#, "sig1=" + mac),
            (#"sig1=("@method");created=1;keyid="k";context="x""#, "sig1=" + mac),  // not defined by RFC 9421
            (#"sig1=("@method");created=1;keyid="k""#, "sig1=:AAAA:"),  // not a 32-byte MAC
            (#"sig1=("@method");created=1;keyid="k""#, "sig2=" + mac),  // another label
            (#"sig1=("@method");created=1;keyid="k""#, "sig1=" + mac + ", sig1=" + mac),  // a repeated label
            (#"sig1=("@method");created=1;keyid="k", sig1=("@path")"#, "sig1=" + mac),
            (#"sig1="@method";created=1;keyid="k""#, "sig1=" + mac),  // not an inner list
            (#"sig1=("date");created=1;keyid="k""#, "sig1=" + mac),  // a field with two lines
            (#"sig1=("x-absent");created=1;keyid="k""#, "sig1=" + mac),  // absent
            (#"sig1=("x-bin");created=1;keyid="k""#, "sig1=" + mac),  // not ASCII
            ("sig1=(" + long + ");created=1;keyid=\"k\"", "sig1=" + mac),  // a base over the buffer
            ("sig1=(" + (0..<17).map { "\"x-\($0)\"" }.joined(separator: " ") + ");created=1", "sig1=" + mac),  // too many
        ]
        for (input, signature) in cases {
            #expect(
                Self.viewAnswer(label: nil, input: input, signature: signature, request: request, key, key) == nil,
                "\(input) / \(signature)")
        }
        // And the same request with a plain covered field is answered: the cases above are refused
        // for their one difference.
        let plain = Self.viewAnswer(
            label: nil, input: #"sig1=("@method" "@query");created=1;keyid="k""#, signature: "sig1=" + mac, request: request, key, key)
        #expect(plain != nil)
    }
}
