import RawStructuredFieldValues

@testable import PorticoSigning

/// What must hold for any pair of `Signature-Input`/`Signature` values the parser accepts.
///
/// A failed property stops the process (`preconditionFailure`), which libFuzzer records as a crash
/// with the input that caused it.
enum SignatureFieldsProperties {
    /// RFC 9421's example request (Appendix B.2) with a few more fields, so that covered components
    /// of every kind (derived, plain field, `;key=` member, `;bs`, repeated lines, `@query-param`)
    /// can find a value.
    static let request = HTTPRequestParts(
        method: "POST", scheme: "https", authority: "Example.com:443",
        requestTarget: "/foo?param=Value&Pet=dog&a+b=c%20d&Pet=cat&empty",
        fields: [
            ("Host", "example.com"),
            ("Date", "Tue, 20 Apr 2021 02:07:55 GMT"),
            ("Content-Type", "application/json"),
            ("Content-Digest", "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"),
            ("Content-Length", "18"),
            ("X-Dictionary", "a=1, b=2;x=1;y=2, c=(a b c), d"),
            ("X-Lines", " one "),
            ("X-Lines", "two\t"),
            ("X-Empty", ""),
            ("X-Client-Version", "2.4.1"),
        ])

    /// The same request with a long query (256 more parameters `q0`…`q255`) and a long dictionary
    /// field (members `m0`…`m255`), as an attacker's are: a base whose cost grew with the number of
    /// covered components times the size of what they read shows up as a slow input (the runs use
    /// a per-input time limit).
    static let longRequest: HTTPRequestParts = {
        var long = request
        long.requestTarget += "&" + (0..<256).map { "q\($0)=\($0)" }.joined(separator: "&")
        long.fields = long.fields.map { field in
            field.name == "X-Dictionary"
                ? (field.name, field.value + ", " + (0..<256).map { "m\($0)=\($0)" }.joined(separator: ", ")) : field
        }
        return long
    }()

    static func check(signatureInput: String, signature: String) {
        agreesWithTheLibrary(signatureInput)
        agreesWithTheLibrary(signature)
        for label in [nil, "sig1"] {
            let reading = Result { () throws(SigningError) in
                try SignatureFields.select(label: label, signatureInput: signatureInput, signature: signature)
            }
            agreesWithTheDictionaryReading(reading, label: label, signatureInput: signatureInput, signature: signature)
            // Under a component limit too (the verifier's `signatures.maxComponents`), both readings agree.
            let limited = Result { () throws(SigningError) in
                try SignatureFields.select(label: label, signatureInput: signatureInput, signature: signature, maxComponents: 4)
            }
            agreesWithTheDictionaryReading(limited, label: label, signatureInput: signatureInput, signature: signature, maxComponents: 4)
            agreesWithTheView(reading, label: label, signatureInput: signatureInput, signature: signature)
            guard case .success(let parsed) = reading else { continue }
            if let label { precondition(parsed.label == label, "select(label:) returned another label") }
            roundTrip(parsed)
            signatureBase(parsed.input)
            _ = try? SignatureBase.make(for: parsed.input, request: longRequest)
            signAndVerify(parsed)
        }
    }

    /// The signing module's dictionary parser accepts what swift-http-structured-headers' accepts,
    /// with the same keys and values, except a repeated key, which it refuses; and it accepts
    /// nothing the library refuses.
    private static func agreesWithTheLibrary(_ value: String) {
        var parser = StructuredFieldValueParser(Array(value.utf8))
        let library = try? parser.parseDictionaryFieldValue()
        let ours: StructuredDictionary
        do {
            ours = try StructuredDictionary.parse(value)
        } catch {
            guard let library else { return }
            guard let key = error.duplicateKey else { preconditionFailure("refused what the library accepts (\(error)): \(value)") }
            precondition(library[key] != nil, "refused a repeat of \(key), which is no key of the value: \(value)")
            return
        }
        guard let library else { preconditionFailure("accepted what the library refuses: \(value)") }
        precondition(ours.members.map(\.key) == library.map(\.0), "the keys differ from the library's: \(value)")
        for (mine, (_, theirs)) in zip(ours.members, library) {
            precondition(same(mine.value, theirs), "member \(mine.key) differs from the library's reading: \(value)")
        }
    }

    private static func same(_ mine: StructuredDictionary.Value, _ theirs: ItemOrInnerList) -> Bool {
        func same(_ mine: StructuredDictionary.Item, _ theirs: Item) -> Bool {
            mine.bareItem == theirs.rfc9651BareItem && sameParameters(mine.parameters, theirs.rfc9651Parameters)
        }
        func sameParameters(_ mine: [(key: String, value: RFC9651BareItem)], _ theirs: OrderedMap<String, RFC9651BareItem>) -> Bool {
            mine.count == theirs.count && zip(mine, theirs).allSatisfy { $0.key == $1.0 && $0.value == $1.1 }
        }
        switch (mine, theirs) {
        case (.item(let item), .item(let other)): return same(item, other)
        case (.innerList(let items, let parameters), .innerList(let list)):
            return items.count == list.bareInnerList.count && zip(items, list.bareInnerList).allSatisfy { same($0, $1) }
                && sameParameters(parameters, list.rfc9651Parameters)
        default: return false
        }
    }

    /// `select` reads the chosen members straight from the fields; it returns what picking them from
    /// the parsed dictionaries returns, the same `@signature-params` text included, or throws the
    /// same error.
    private static func agreesWithTheDictionaryReading(
        _ reading: Result<SignatureFields.Signature, SigningError>, label: String?, signatureInput: String, signature: String,
        maxComponents: Int = .max
    ) {
        let expected = Result { () throws(SigningError) in
            try SignatureFields.dictionaryReading(
                label: label, signatureInput: signatureInput, signature: signature, maxComponents: maxComponents)
        }
        switch (reading, expected) {
        case (.success(let ours), .success(let theirs)):
            precondition(
                ours.label == theirs.label && ours.input == theirs.input && ours.value == theirs.value,
                "select differs from the dictionary reading: \(signatureInput) / \(signature)")
            precondition(
                (try? ours.input.serialized()) == (try? theirs.input.serialized()),
                "select's @signature-params differ from the dictionary reading's: \(signatureInput)")
        case (.failure(let ours), .failure(let theirs)):
            precondition(
                ours == theirs, "select refuses with \(ours), the dictionary reading with \(theirs): \(signatureInput) / \(signature)")
        default:
            preconditionFailure("select and the dictionary reading disagree on \(signatureInput) / \(signature): \(reading) vs \(expected)")
        }
    }

    /// Where the in-place reading (`SignatureView`) answers, `select` accepts the same signature
    /// with the same parameters, and the base the view builds is the general one, byte for byte.
    private static func agreesWithTheView(
        _ reading: Result<SignatureFields.Signature, SigningError>, label: String?, signatureInput: String, signature: String
    ) {
        guard let view = SignatureView.read(label: label, signatureInput: signatureInput, signature: signature) else { return }
        guard case .success(let parsed) = reading else {
            preconditionFailure("the view reads what select refuses: \(signatureInput) / \(signature)")
        }
        precondition(
            view.keyID == parsed.input.keyID && view.created == parsed.input.created && view.expires == parsed.input.expires
                && view.nonce == parsed.input.nonce,
            "the view reads other parameters than select: \(signatureInput)")
        guard let base = view.base(request: request) else { return }
        precondition(
            (try? SignatureBase.make(for: parsed.input, request: request)).map { Array($0.utf8) } == base,
            "the view's signature base differs from the general one: \(signatureInput)")
    }

    /// Serialising a parsed signature and parsing it again gives the same signature.
    private static func roundTrip(_ parsed: SignatureFields.Signature) {
        let fields: (signatureInput: String, signature: String)
        do {
            fields = try SignatureFields.serialize(label: parsed.label, input: parsed.input, signature: parsed.value)
        } catch {
            preconditionFailure("an accepted signature cannot be serialised again: \(error)")
        }
        let again: SignatureFields.Signature
        do {
            again = try SignatureFields.select(label: parsed.label, signatureInput: fields.signatureInput, signature: fields.signature)
        } catch {
            preconditionFailure("a serialised signature does not parse: \(error)\n\(fields.signatureInput)\n\(fields.signature)")
        }
        // Compared as serialised text, which is what a signature base holds: the structured-field
        // types compare representations (a parsed `1.00` is not equal to a parsed `1.0`), while
        // serialisation is canonical.
        guard let params = try? parsed.input.serialized(), let paramsAgain = try? again.input.serialized() else {
            preconditionFailure("an accepted Signature-Input member cannot be serialised as @signature-params")
        }
        precondition(paramsAgain == params, "the covered components or parameters changed in a round trip: \(params) → \(paramsAgain)")
        precondition(again.input.components.count == parsed.input.components.count, "covered components were lost in a round trip")
        precondition(again.value == parsed.value, "the signature bytes changed in a round trip")
        precondition(fields.signatureInput == parsed.label + "=" + params, "Signature-Input is not label=@signature-params")
    }

    /// A signature base that can be built has exactly one line per covered component, then the
    /// `@signature-params` line, and only visible ASCII, spaces and tabs in its lines: no value can
    /// forge a line of its own.
    private static func signatureBase(_ input: SignatureInput) {
        guard let base = try? SignatureBase.make(for: input, request: request) else { return }
        let lines = base.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        precondition(
            lines.count == input.components.count + 1,
            "the signature base has \(lines.count) lines for \(input.components.count) components")
        for line in lines {
            precondition(
                line.allSatisfy { $0 == 0x09 || (0x20...0x7E).contains($0) }, "a signature base line holds a control or non-ASCII byte")
        }
        guard let params = try? input.serialized() else { preconditionFailure("a built base's parameters cannot be serialised") }
        precondition(
            String(decoding: lines.last!, as: UTF8.self) == "\"@signature-params\": " + params, "the last line is not @signature-params")
    }

    /// Signing the parsed input over the fixed request, then verifying what was signed, succeeds;
    /// the received signature bytes verify only if they happen to be that MAC.
    private static func signAndVerify(_ parsed: SignatureFields.Signature) {
        let authenticator = ChecksumAuthenticator()
        let verified = try? MessageSignature.verify(parsed, request: request, authenticator: authenticator)
        guard let fields = try? MessageSignature.sign(request, input: parsed.input, label: parsed.label, authenticator: authenticator)
        else {
            precondition(verified != true, "a signature verified over an input that cannot be signed")
            return
        }
        let signed: SignatureFields.Signature
        do {
            signed = try SignatureFields.select(label: parsed.label, signatureInput: fields.signatureInput, signature: fields.signature)
        } catch {
            preconditionFailure("fields made by sign() do not parse: \(error)")
        }
        precondition(
            (try? MessageSignature.verify(signed, request: request, authenticator: authenticator)) == true, "sign() then verify() fails")
    }
}

/// A stand-in for HMAC: a keyless 32-byte checksum (FNV-1a in four lanes). The properties are about
/// parsing and signature bases, not cryptography, and a real MAC would only slow the fuzzer down.
struct ChecksumAuthenticator: MessageAuthenticator {
    func authenticationCode(for message: UnsafeRawBufferPointer) -> [UInt8] {
        var lanes: [UInt64] = [0xcbf2_9ce4_8422_2325, 0x8422_2325_cbf2_9ce4, 0x9ce4_cbf2_2325_8422, 0x2325_8422_9ce4_cbf2]
        for (index, byte) in message.enumerated() {
            lanes[index & 3] = (lanes[index & 3] ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return lanes.flatMap { lane in (0..<8).map { UInt8(truncatingIfNeeded: lane >> ($0 * 8)) } }
    }
}
