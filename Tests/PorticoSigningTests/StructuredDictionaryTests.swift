import RawStructuredFieldValues
import Testing

@testable import PorticoSigning

/// The signing module's dictionary parser against the structured-headers library's: on tens of
/// thousands of generated and mutated field values, both accept the same ones and read the same
/// values, except that a repeated top-level key, which the library lets the last one win, is refused.
@Suite struct StructuredDictionaryTests {
    typealias SplitMix = SignaturePropertyTests.SplitMix

    /// The library's reading of `value`, in this module's shape; nil when it refuses the value.
    static func libraryReading(_ value: String) -> (keys: [String], members: [(String, StructuredDictionary.Value)])? {
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let map = try? parser.parseDictionaryFieldValue() else { return nil }
        func item(_ item: Item) -> StructuredDictionary.Item {
            StructuredDictionary.Item(bareItem: item.rfc9651BareItem, parameters: item.rfc9651Parameters.map { ($0.0, $0.1) })
        }
        let members = map.map { key, member -> (String, StructuredDictionary.Value) in
            switch member {
            case .item(let value): (key, .item(item(value)))
            case .innerList(let list):
                (key, .innerList(list.bareInnerList.map(item), parameters: list.rfc9651Parameters.map { ($0.0, $0.1) }))
            }
        }
        return (map.map(\.0), members)
    }

    static func same(_ lhs: StructuredDictionary.Item, _ rhs: StructuredDictionary.Item) -> Bool {
        lhs.bareItem == rhs.bareItem && lhs.parameters.elementsEqual(rhs.parameters) { $0.key == $1.key && $0.value == $1.value }
    }

    static func same(_ lhs: StructuredDictionary.Value, _ rhs: StructuredDictionary.Value) -> Bool {
        switch (lhs, rhs) {
        case (.item(let a), .item(let b)): same(a, b)
        case (.innerList(let a, let p), .innerList(let b, let q)):
            a.elementsEqual(b, by: same) && p.elementsEqual(q) { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    // MARK: Generation

    static let tokens = ["sig1", "sig-b21", "a", "*x", "key_1", "k.2", "hmac-sha256", "Foo/bar:baz", "?"]
    static let strings = ["", "@method", "content-digest", "a \\\"quoted\\\" one", "back\\\\slash", "x-client-version", "%"]

    static func bareItem(_ random: inout SplitMix) -> String {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: String(Int.random(in: -999_999...999_999, using: &random))
        case 1: "\(Int.random(in: -99...99, using: &random)).\(Int.random(in: 0...999, using: &random))"
        case 2: "\"" + strings.randomElement(using: &random)! + "\""
        case 3: ["Token", "*", "text/plain", "a:b"].randomElement(using: &random)!
        case 4: ":" + ["", "AAAA", "cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==", "YQ", "////"].randomElement(using: &random)! + ":"
        case 5: Bool.random(using: &random) ? "?1" : "?0"
        case 6: "@" + String(Int.random(in: 0...1_800_000_000, using: &random))
        case 7: "%\"" + ["plain", "f%c3%bc%c3%bc", "%22q%22"].randomElement(using: &random)! + "\""
        default: String(Int.random(in: 0...2_000_000_000, using: &random))
        }
    }

    static func parameters(_ random: inout SplitMix) -> String {
        (0..<Int.random(in: 0...3, using: &random)).map { _ in
            let key = ["created", "keyid", "nonce", "alg", "a", "b*", "x-y"].randomElement(using: &random)!
            return Bool.random(using: &random) ? ";\(key)" : ";\(key)=\(bareItem(&random))"
        }.joined()
    }

    static func member(_ random: inout SplitMix) -> String {
        let key = ["sig1", "sig2", "sig-b21", "a", "*b", "x.y", "k_1"].randomElement(using: &random)!
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return key + parameters(&random)
        case 1:
            let items = (0..<Int.random(in: 0...4, using: &random)).map { _ in bareItem(&random) + parameters(&random) }
            return key + "=(" + items.joined(separator: String(repeating: " ", count: Int.random(in: 1...2, using: &random))) + ")"
                + parameters(&random)
        default: return key + "=" + bareItem(&random) + parameters(&random)
        }
    }

    static func dictionary(_ random: inout SplitMix) -> String {
        let separators = [", ", ",", " ,\t", ",  "]
        return (0..<Int.random(in: 1...3, using: &random)).map { _ in member(&random) }
            .joined(separator: separators.randomElement(using: &random)!)
    }

    /// One random change: a byte replaced, inserted or removed.
    static func mutated(_ value: String, _ random: inout SplitMix) -> String {
        var bytes = Array(value.utf8)
        let interesting = Array(" ,;=()\":?*@%-.\\\t0aAzZ/".utf8) + [0x7F, 0x01]
        let position = Int.random(in: 0...bytes.count, using: &random)
        switch Int.random(in: 0..<3, using: &random) {
        case 0 where position < bytes.count: bytes[position] = interesting.randomElement(using: &random)!
        case 1 where position < bytes.count: bytes.remove(at: position)
        default: bytes.insert(interesting.randomElement(using: &random)!, at: position)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("agrees with the library on 40,000 generated and mutated values, refusing only repeated keys", arguments: 0..<4)
    func agreesWithTheLibrary(seed: UInt64) {
        var random = SplitMix(state: 0x5EED_0000 &+ seed)
        var accepted = 0
        var repeats = 0
        var kept = 0
        var notKept = 0
        for round in 0..<10_000 {
            var value = Self.dictionary(&random)
            if round % 2 == 1 { value = Self.mutated(value, &random) }
            let library = Self.libraryReading(value)
            switch Result(catching: { () throws(StructuredDictionary.ParseError) in try StructuredDictionary.parse(value) }) {
            case .success(let ours):
                guard let library else {
                    Issue.record("accepted what the library refuses: \(value)")
                    continue
                }
                accepted += 1
                #expect(ours.members.map(\.key) == library.keys, "\(value)")
                for (mine, theirs) in zip(ours.members, library.members) {
                    #expect(Self.same(mine.value, theirs.1), "\(value): member \(mine.key)")
                }
                // A member's text kept as canonical must be exactly what serialising it writes.
                for member in ours.members {
                    let text = ours.canonicalText(of: member.key).map(String.init)
                    guard case .innerList = member.value else { continue }
                    let serialized = Self.serialized(member.value)
                    if let text {
                        kept += 1
                        #expect(text == serialized, "\(value): member \(member.key) kept as canonical")
                    } else if serialized != nil {
                        notKept += 1
                    }
                }
            case .failure(let error):
                if let key = error.duplicateKey {
                    // A repeat is refused where the library would let the last one win (or, if the
                    // rest of the value is broken too, where it refuses for that); it must be real.
                    #expect(value.ranges(of: key).count >= 2, "\(value): \(key) does not repeat")
                    if let library {
                        repeats += 1
                        #expect(library.keys.contains(key), "\(value): \(key) is not a key")
                    }
                } else {
                    #expect(library == nil, "refused what the library accepts: \(value) (\(error))")
                }
            }
        }
        // The generator must exercise both sides, or the agreement means nothing.
        #expect(accepted > 2_000)
        #expect(repeats > 100)
        #expect(kept > 200 && notKept > 200, "kept \(kept), not kept \(notKept)")
    }

    /// What the field writer makes of a parsed member; nil when it cannot write it.
    static func serialized(_ value: StructuredDictionary.Value) -> String? {
        var bytes: [UInt8] = []
        guard (try? StructuredFieldWriter.appendMemberValue(value, to: &bytes)) != nil else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("a member written canonically is kept as received; one that serialising would change is not")
    func canonicalTexts() throws {
        let canonical =
            #"("@method" "@query-param";name="a%20b" "content-digest";key="sha-256");created=1618884473;keyid="k";nonce="n\"q";x;y=?0;z=-5"#
        #expect(try StructuredDictionary.parse("sig1=" + canonical + " , sig2=()").canonicalText(of: "sig1").map(String.init) == canonical)
        #expect(try StructuredDictionary.parse("sig2=()").canonicalText(of: "sig2").map(String.init) == "()")
        let rewritten = [
            #"( "@method")"#, #"("@method" )"#, #"("@method"  "@path")"#, #"("@method");created=01"#, #"();created=-0"#,
            #"();x=?1"#, #"();x=1.50"#, #"();x=1.5"#, #"();x=%"a""#, #"(); created=1"#, #"();a=1;a=2"#, #"("@method";x=?1)"#,
        ]
        for member in rewritten {
            let parsed = try StructuredDictionary.parse("sig1=" + member)
            #expect(parsed.canonicalText(of: "sig1") == nil, "\(member)")
        }
        // Items are not kept at all: only Signature-Input's inner lists are ever rebuilt.
        #expect(try StructuredDictionary.parse("a=1").canonicalText(of: "a") == nil)
    }

    @Test("RFC 9421's and RFC 9651's examples read as the library reads them")
    func examples() throws {
        let values = [
            #"sig-b21=();created=1618884473;keyid="test-key-rsa-pss";nonce="b3k2pp5k7z-50gnwp.yemd""#,
            #"sig-b22=("@authority" "content-digest" "@query-param";name="Pet");created=1618884473;keyid="test-key-rsa-pss";tag="header-example""#,
            #"sig1=:P0wLUszWQjoi54udOtydf9IWTfNhy+r53jGFj9XZuP4uKwxyJo1RSHi+oEF1FuX6O29d+lbxwwBao1BAgadijW+7O/PyezlTnqAOVPWx9GlyntiCiHzC87qmSQjvu1CFyFuWSjdGa3qLYYlNm7pVaJFalQiKWnUaqfT4LyttaXyoyZW84jS8gyarxAiWI97mPXU+OVM64+HVBHmnEsS+lTeIsEQo36T3NFf2CujWARPQg53r58RmpZ+J9eKR2CD6IJQvacn5A4Ix5BUAVGqlyp8JYm+S/CWJi31PNUjRRCusCVRj05NrxABNFv3r5S9IXf2fYJK+eyW4AiGVMvMcOg==:"#,
            "a=?0, b, c; foo=bar",
            "rating=1.5, feelings=(joy sadness)",
            "a=(1 2), b=3, c=4;aa=bb, d=(5 6);valid",
        ]
        for value in values {
            let ours = try StructuredDictionary.parse(value)
            let library = try #require(Self.libraryReading(value))
            #expect(ours.members.map(\.key) == library.keys)
            for (mine, theirs) in zip(ours.members, library.members) { #expect(Self.same(mine.value, theirs.1), "\(value)") }
        }
    }

    @Test("a repeated label is refused and named; a repeated parameter keeps its place and takes the last value")
    func repeats() throws {
        #expect(throws: StructuredDictionary.ParseError.self) { try StructuredDictionary.parse(#"sig1=("@method"), sig2=(), sig1=()"#) }
        do {
            _ = try StructuredDictionary.parse(#"sig1=("@method"), sig2=(), sig1=()"#)
        } catch {
            #expect(error.duplicateKey == "sig1")
        }
        let parsed = try StructuredDictionary.parse("a=1;x=1;y=2;x=3")
        guard case .item(let item)? = parsed["a"] else {
            Issue.record("a is not an item")
            return
        }
        #expect(item.parameters.map(\.key) == ["x", "y"])
        #expect(item.parameters.first?.value == .integer(3))
    }

    @Test("base64 decodes with and without padding, and refuses what is not base64")
    func base64() {
        #expect(Base64.decode("cHJldGVuZA==") == Array("pretend".utf8))
        #expect(Base64.decode("cHJldGVuZA") == Array("pretend".utf8))
        #expect(Base64.decode("") == [])
        #expect(Base64.decode("YWJj") == Array("abc".utf8))
        #expect(Base64.decode("YW=J") == nil)
        #expect(Base64.decode("Y") == nil)
        #expect(Base64.decode("YWJ") == Array("ab".utf8))
        #expect(Base64.decode("YQ=") == nil)
        #expect(Base64.decode("YW Jj") == nil)
        #expect(Base64.decode("YW-j") == nil)
    }
}
