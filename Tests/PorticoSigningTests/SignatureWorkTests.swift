import RawStructuredFieldValues
import Synchronization
import Testing

@testable import PorticoSigning

/// What one signature can make a verifier do is bounded by the size of the request and by the
/// verifier's limits: the query and each dictionary field are read once per base, however many
/// components cover them; the components and the base have ceilings; and repeated keys are found
/// without comparing every key with every other.
@Suite struct SignatureWorkTests {
    /// A request that counts how often the base reads its target and its fields.
    final class CountingRequest: SignableRequest, Sendable {
        let parts: HTTPRequestParts
        let targetReads = Atomic<Int>(0)
        let fieldReads = Atomic<Int>(0)

        init(target: String, fields: [(name: String, value: String)] = []) {
            parts = HTTPRequestParts(method: "GET", scheme: "https", authority: "example.com", requestTarget: target, fields: fields)
        }

        var method: String { parts.method }
        var scheme: String { parts.scheme }
        var authority: String { parts.authority }
        var requestTarget: String {
            targetReads.add(1, ordering: .relaxed)
            return parts.requestTarget
        }
        func fieldValues(_ name: String) -> [String] {
            fieldReads.add(1, ordering: .relaxed)
            return parts.fieldValues(name)
        }
    }

    static func input(_ components: [ComponentIdentifier]) -> SignatureInput {
        SignatureInput(components: components, created: 1, nonce: "n", keyID: "k")
    }

    @Test("the query is read once for a base, however many @query-param components it covers")
    func queryReadOnce() throws {
        let query = (0..<700).map { "p\($0)=v\($0)" }.joined(separator: "&")
        let one = CountingRequest(target: "/search?" + query)
        _ = try SignatureBase.make(for: Self.input([.queryParameter("p0")]), request: one)
        let request = CountingRequest(target: "/search?" + query)
        let components = (0..<300).map { ComponentIdentifier.queryParameter("p\($0 * 2)") }
        let base = try SignatureBase.make(for: Self.input(components), request: request)
        // As many reads of the target as for one such component (finding the query, then parsing it).
        #expect(request.targetReads.load(ordering: .relaxed) == one.targetReads.load(ordering: .relaxed))
        #expect(request.targetReads.load(ordering: .relaxed) <= 2)
        // And every line holds its own parameter's value.
        #expect(base.split(separator: "\n").count == 301)
        #expect(base.contains("\"@query-param\";name=\"p598\": v598\n"))
    }

    @Test("a dictionary field is read and parsed once for a base, however many of its members are covered")
    func dictionaryReadOnce() throws {
        let members = (0..<500).map { "m\($0)=\($0)" }.joined(separator: ", ")
        let request = CountingRequest(target: "/", fields: [("x-dictionary", members)])
        let components = (0..<200).map { ComponentIdentifier("x-dictionary", parameters: [("key", .string("m\($0)"))]) }
        let base = try SignatureBase.make(for: Self.input(components), request: request)
        #expect(request.fieldReads.load(ordering: .relaxed) == 1)
        #expect(base.contains("\"x-dictionary\";key=\"m199\": 199\n"))
        // An absent member and an absent field are still named as such.
        #expect(throws: SigningError.componentNotInMessage(#""x-dictionary";key="nope""#)) {
            try SignatureBase.make(
                for: Self.input([ComponentIdentifier("x-dictionary", parameters: [("key", .string("nope"))])]), request: request)
        }
        #expect(throws: SigningError.componentNotInMessage(#""x-absent";key="a""#)) {
            try SignatureBase.make(
                for: Self.input([ComponentIdentifier("x-absent", parameters: [("key", .string("a"))])]), request: request)
        }
    }

    @Test("the signature fields hold at most 64 members and 16 parameters an item, in both readings; a general dictionary more")
    func signatureFieldLimits() throws {
        let members = (0..<65).map { "s\($0)=(\"@method\");created=1;keyid=\"k\"" }.joined(separator: ", ")
        let parameters = #"sig1=("@method")"# + (0..<17).map { ";p\($0)=1" }.joined() + #";created=1;keyid="k""#
        let signature = "sig1=:AAAA:"
        for input in [members, parameters] {
            for reading in [
                Result { () throws(SigningError) in try SignatureFields.select(label: nil, signatureInput: input, signature: signature) },
                Result { () throws(SigningError) in
                    try SignatureFields.dictionaryReading(label: nil, signatureInput: input, signature: signature)
                },
            ] {
                guard case .failure(.malformedField(field: "Signature-Input", let reason)) = reading else {
                    Issue.record("not refused as malformed: \(reading)")
                    continue
                }
                #expect(reason.contains("more than 64 members") || reason.contains("more than 16 parameters"))
            }
            var view = SignatureView(signatureInput: input)
            let viewRead = view.read(label: nil, signature: signature)
            #expect(!viewRead)
            // Read as a general dictionary, the same values are fine.
            #expect(throws: Never.self) { try StructuredDictionary.parse(input) }
        }
        // Exactly at the limits, both are read.
        let atLimit = (0..<64).map { "s\($0)=(\"@method\")" + (0..<14).map { ";p\($0)=1" }.joined() + #";created=1;keyid="k""# }
        #expect(
            try SignatureFields.select(label: "s63", signatureInput: atLimit.joined(separator: ", "), signature: "s63=:AAAA:").label
                == "s63")
    }

    @Test("a covered dictionary member is read as RFC 9651 reads it: a repeated key keeps its last value")
    func dictionaryMemberLastWins() throws {
        let request = CountingRequest(target: "/", fields: [("x-dictionary", "a=1, b=2, a=3")])
        let base = try SignatureBase.make(
            for: Self.input([ComponentIdentifier("x-dictionary", parameters: [("key", .string("a"))])]), request: request)
        #expect(base.hasPrefix("\"x-dictionary\";key=\"a\": 3\n"))
    }

    @Test("a parameter named twice in the query is still ambiguous, and one named once is found")
    func ambiguousQueryParameter() throws {
        let request = CountingRequest(target: "/?a=1&b=2&a=3&c")
        #expect(throws: SigningError.ambiguousQueryParameter("a")) {
            try SignatureBase.make(for: Self.input([.queryParameter("a")]), request: request)
        }
        #expect(
            try SignatureBase.make(for: Self.input([.queryParameter("b"), .queryParameter("c")]), request: request).hasPrefix(
                "\"@query-param\";name=\"b\": 2\n\"@query-param\";name=\"c\": \n"))
    }

    @Test("a base longer than the limit is refused as soon as it is, before any MAC")
    func baseLimit() throws {
        let request = CountingRequest(target: "/", fields: [("x-big", String(repeating: "a", count: 3000))])
        let input = Self.input([.method, .field("x-big")])
        var base: [UInt8] = []
        #expect(throws: SigningError.baseTooLarge(limit: 2048)) {
            try SignatureBase.write(for: input, request: request, to: &base, maxBytes: 2048)
        }
        base = []
        try SignatureBase.write(for: input, request: request, to: &base, maxBytes: 4096)
        #expect(base.count > 3000 && base.count <= 4096)
    }

    @Test("a signature covering more components than the limit is refused, by both readings, before they are compared")
    func componentLimit() throws {
        func fields(_ count: Int) -> String {
            "sig1=(" + (0..<count).map { "\"x-f\($0)\"" }.joined(separator: " ") + ");created=1;keyid=\"k\""
        }
        let signature = "sig1=:" + String(repeating: "A", count: 43) + "=:"
        /// Both readings of the same fields, under the same limit.
        func read(_ input: String, limit: Int) -> [Result<SignatureFields.Signature, SigningError>] {
            [
                Result { () throws(SigningError) in
                    try SignatureFields.select(label: nil, signatureInput: input, signature: signature, maxComponents: limit)
                },
                Result { () throws(SigningError) in
                    try SignatureFields.dictionaryReading(label: nil, signatureInput: input, signature: signature, maxComponents: limit)
                },
            ]
        }
        for result in read(fields(33), limit: 32) {
            #expect(throws: SigningError.tooManyComponents(limit: 32)) { try result.get() }
        }
        for result in read(fields(32), limit: 32) {
            #expect(try result.get().input.components.count == 32)
        }
        // A repeat past the limit is not looked for: the limit answers first.
        for result in read(#"sig1=("a" "b" "c" "a");created=1;keyid="k""#, limit: 3) {
            #expect(throws: SigningError.tooManyComponents(limit: 3)) { try result.get() }
        }
    }

    @Test("a repeated key is found among thousands of members and parameters, wherever it stands")
    func repeatedKeysAmongMany() throws {
        let many = (0..<3000).map { "k\($0)=1" }
        for position in [0, 1, 7, 8, 9, 1500, 2999] {
            let value = (many + ["k\(position)=2"]).joined(separator: ", ")
            #expect(throws: StructuredDictionary.ParseError.self) { try StructuredDictionary.parse(value) }
        }
        // The signature fields hold at most 64 members; a repeat among them is a repeated label.
        let labels = (0..<63).map { "k\($0)=(\"@method\")" }
        for position in [0, 1, 7, 8, 9, 40, 62] {
            let value = (labels + ["k\(position)=(\"@path\")"]).joined(separator: ", ")
            #expect(throws: SigningError.duplicateLabel(field: "Signature-Input", label: "k\(position)")) {
                try SignatureFields.select(label: "k1", signatureInput: value, signature: "k1=:AAAA:")
            }
        }
        let distinct = try StructuredDictionary.parse(many.joined(separator: ", "))
        #expect(distinct.members.count == 3000)
        // Parameters: the last of a repeated key wins, in the first one's place, among many.
        let parameters = (0..<2000).map { ";p\($0)=\($0)" }.joined()
        let parsed = try StructuredDictionary.parse("a=1" + parameters + ";p1500=x;p3=y")
        guard case .item(let item) = parsed.members[0].value else {
            Issue.record("not an item")
            return
        }
        #expect(item.parameters.count == 2000)
        #expect(item.parameters[1500].key == "p1500" && item.parameters[1500].value == .token("x"))
        #expect(item.parameters[3].value == .token("y"))
    }
}

@Suite struct SortedByteStringsTests {
    @Test("every string is found where it stands, and nothing else is, the empty one included")
    func lookups() {
        let names = ["", "a", "ab", "b", "p1", "p10", "p2", "zzz", "%20", "a%2Bb"]
        let sorted = SortedByteStrings(names)
        #expect(sorted.count == names.count)
        for name in names {
            var bytes = Array(name.utf8)
            let position = bytes.withUnsafeMutableBufferPointer { sorted.position(of: UnsafeBufferPointer($0)) }
            #expect(position.map { sorted[$0] } == name, "\(name)")
        }
        for absent in ["c", "p", "p3", "zzzz", "aa", "A", " "] {
            var bytes = Array(absent.utf8)
            #expect(bytes.withUnsafeMutableBufferPointer { sorted.position(of: UnsafeBufferPointer($0)) } == nil, "\(absent)")
        }
    }
}
