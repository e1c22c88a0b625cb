import Foundation
import Testing

@testable import PorticoReform

/// How a JSON source body is read (Foundation's `JSONSerialization`, then ``ReformValue``): what
/// each kind of value becomes, and what is refused.
@Suite("JSON reader")
struct JSONReaderTests {
    static func read(_ text: String) -> ReformValue? {
        try? ReformValue.readJSON(Data(text.utf8))
    }

    @Test("scalars keep their kinds: booleans apart from numbers, integers apart from fractions")
    func scalars() {
        #expect(Self.read("true") == .boolean(true))
        #expect(Self.read(" false ") == .boolean(false))
        #expect(Self.read("null") == .null)
        #expect(Self.read("1").map { if case .integer(1) = $0 { true } else { false } } == true)
        #expect(Self.read("-0").map { if case .integer(0) = $0 { true } else { false } } == true)
        #expect(Self.read("1.0").map { if case .number(1) = $0 { true } else { false } } == true)
        #expect(Self.read("2.5e3").map { if case .number(2500) = $0 { true } else { false } } == true)
        // Int64.min: Foundation reads it as a Double; either kind is the same value, and a contract
        // asking for an integer gets it as one.
        #expect(Self.read("-9223372036854775808") == .integer(.min))
        #expect(Self.read("9223372036854775807").map { if case .integer(.max) = $0 { true } else { false } } == true)
        // Past Int64, an integer is still a number.
        #expect(Self.read("9223372036854775808").map { if case .number(9.223_372_036_854_775_808e18) = $0 { true } else { false } } == true)
        #expect(Self.read("-530.12") == .number(-530.12))
        #expect(Self.read("1E-2") == .number(0.01))
    }

    @Test("strings: every escape, surrogate pairs, and UTF-8 as it is")
    func strings() {
        #expect(Self.read(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{C}\n\r\t"))
        #expect(Self.read(#""\u0041\u00e9\u2013\ud83d\ude00\u0000""#) == .string("Aé\u{2013}😀\u{0}"))
        #expect(Self.read(#""Zürich – 東京 😀""#) == .string("Zürich – 東京 😀"))
        #expect(Self.read(#""mixed é\n€""#) == .string("mixed é\n€"))
        #expect(Self.read(#""""#) == .string(""))
    }

    @Test("objects list their members by name, a repeated name keeping its last value; arrays keep their order")
    func structures() {
        #expect(Self.read(#"{"b":1,"a":[3,2,{"z":null,"y":true}],"c":{}}"#)?.json == #"{"a":[3,2,{"y":true,"z":null}],"b":1,"c":{}}"#)
        #expect(Self.read(#"{"k":1,"j":0,"k":2}"#)?.json == #"{"j":0,"k":2}"#)
        #expect(Self.read(" [ ] ") == .array([]))
        #expect(Self.read("\t{\r\n\"a\" : [ 1 , 2 ] }\n") == .object([("a", .array([.integer(1), .integer(2)]))]))
    }

    @Test("what RFC 8259 does not allow is refused, with where")
    func refused() {
        let cases = [
            "", " ", "{", "{\"a\" 1}", "{a:1}", "['a']", "01", "-", "1.", ".5", "1e", "+1", "NaN",
            "Infinity", "1e400", "tru", "nul", "\"abc", "\"a\\x\"", "\"\\u12\"", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"",
            "\"tab\there\"", "\"line\nbreak\"", "// c\n1", "1 2", "[1] x", "{\"a\":1}}",
        ]
        // (Foundation accepts one trailing comma, `[1,]`; nothing a contract could misread.)
        for text in cases {
            #expect(Self.read(text) == nil, "\(text.debugDescription)")
        }
        // Invalid UTF-8 inside a string, with and without an escape beside it.
        for bytes: [UInt8] in [[0x22, 0xC3, 0x28, 0x22], [0x22, 0x5C, 0x6E, 0xFF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22]] {
            #expect((try? ReformValue.readJSON(Data(bytes))) == nil, "\(bytes)")
        }
        // The refusal says what Foundation found, for the log and the 502's detail.
        do {
            _ = try ReformValue.readJSON(Data(#"{"a":[1,2,}"#.utf8))
            Issue.record("accepted")
        } catch {
            guard case .malformed(.json, let detail) = error.kind else {
                Issue.record("\(error)")
                return
            }
            #expect(!detail.isEmpty)
        }
    }

    @Test("nesting is bounded: a body of nothing but openings is refused, not a stack overflow")
    func depth() {
        #expect(Self.read(String(repeating: "[", count: 100) + String(repeating: "]", count: 100)) != nil)
        #expect(Self.read(String(repeating: "[", count: 100_000)) == nil)
        #expect(Self.read(String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)) == nil)
    }

    @Test("it reads what Foundation's JSONSerialization reads, to the same values")
    func agreesWithFoundation() throws {
        let documents = [
            #"{"query":{"results":{"channel":{"item":{"condition":{"temp":"18","text":"Partly Cloudy"}}}}}}"#,
            #"{"symbol":"AAPL","name":"Apple Inc.","currentPrice":189.84,"openingPrice":187.15,"volume":52164500}"#,
            #"[1,-2,3.25,-4e-2,"x\u00e9",true,false,null,{"k":[{}]}]"#,
        ]
        for document in documents {
            let ours = try #require(Self.read(document))
            let theirs = try JSONSerialization.jsonObject(with: Data(document.utf8), options: [.fragmentsAllowed])
            let canonical = try JSONSerialization.data(withJSONObject: theirs, options: [.sortedKeys, .fragmentsAllowed])
            let ourCanonical = try JSONSerialization.data(
                withJSONObject: try JSONSerialization.jsonObject(with: Data(ours.json.utf8), options: [.fragmentsAllowed]),
                options: [.sortedKeys, .fragmentsAllowed])
            #expect(ourCanonical == canonical, "\(document)")
        }
    }
}
