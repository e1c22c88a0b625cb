import Foundation
import PorticoReform
import Testing

/// Every conversion, what it accepts and what it refuses, through a one-field JSON source.
@Suite("Reformer conversions")
struct ConversionTests {
    /// Reforms `{"v": <raw>}` with `conversions` into a field of `type`.
    static func convert(_ raw: String, _ conversions: [Conversion], to type: FieldType) throws(ReformError) -> String {
        let reformer = Reformer(format: .json, mappings: [.init(field: "v", locator: .jsonPointer("/v"), conversions: conversions)])
        let result = try reformer.reform(Data("{\"v\":\(raw)}".utf8), contract: Contract(fields: [.init(name: "v", type: type)]))
        return String(result.json.dropFirst(5).dropLast())
    }

    @Test(
        "each conversion turns what it is given into the contract's value",
        arguments: [
            (#""530.12""#, [Conversion.number], FieldType.number, "530.12"),
            (#"" -7 ""#, [.number], .number, "-7"),
            ("12.5", [.number], .number, "12.5"),
            (#""42""#, [.integer], .integer, "42"),
            ("42.0", [.integer], .integer, "42"),
            ("530.12", [.string], .string, #""530.12""#),
            ("545", [.string], .string, #""545""#),
            ("true", [.string], .string, #""true""#),
            (#""yes""#, [.boolean], .boolean, "true"),
            (#""0""#, [.boolean], .boolean, "false"),
            ("1", [.boolean], .boolean, "true"),
            (#""  AAPL \n""#, [.trim], .string, #""AAPL""#),
            (#""\"AAPL\"""#, [.stripQuotes], .string, #""AAPL""#),
            (#""'AAPL'""#, [.stripQuotes], .string, #""AAPL""#),
            (#""\"AAPL'""#, [.stripQuotes], .string, #""\"AAPL'""#),
            (#""-2.92%""#, [.percentToNumber], .number, "-2.92"),
            (#""+0.5 %""#, [.trim, .percentToNumber], .number, "0.5"),
            ("-2.92", [.numberToPercent], .string, #""-2.92%""#),
            (#""-2.92""#, [.numberToPercent], .string, #""-2.92%""#),
            (#""-2.92%""#, [.numberToPercent], .string, #""-2.92%""#),
            (#""-2.92%""#, [.percentToNumber, .numberToPercent], .string, #""-2.92%""#),
            ("3", [.numberToPercent], .string, #""3%""#),
            (#""Partly Cloudy""#, [.lowercase], .string, #""partly cloudy""#),
            (#""aapl""#, [.uppercase], .string, #""AAPL""#),
            (#""18""#, [.number, .string], .string, #""18""#),
            // Pretty-printed XML keeps the line breaks around an element's text.
            (#""\n  530.12\n""#, [.number], .number, "530.12"),
            (#""\n  42\n""#, [.integer], .integer, "42"),
            (#""\n -2.92%\n""#, [.percentToNumber], .number, "-2.92"),
        ])
    func converts(raw: String, conversions: [Conversion], type: FieldType, expected: String) throws {
        #expect(try Self.convert(raw, conversions, to: type) == expected)
    }

    @Test(
        "a conversion that cannot apply names the field, the conversion and the value",
        arguments: [
            (#""abc""#, Conversion.number), (#""nan""#, .number), (#""inf""#, .number), (#""0x1A""#, .number),
            ("12.5", .integer), (#""1.5""#, .integer), (#""maybe""#, .boolean), ("2", .boolean),
            ("[1]", .string), (#""12 %%""#, .percentToNumber), ("true", .numberToPercent), ("{}", .number),
        ])
    func refuses(raw: String, conversion: Conversion) {
        do {
            _ = try Self.convert(raw, [conversion], to: .string)
            Issue.record("\(raw) was converted by \(conversion)")
        } catch {
            guard case .conversionFailed(let field, let name, _) = error.kind else {
                Issue.record("\(raw) \(conversion): \(error)")
                return
            }
            #expect(field == "v")
            #expect(name == conversion.rawValue)
        }
    }

    @Test("fixed values and request parameters fill fields the body does not hold; renames map any source name")
    func fixedAndParameters() throws {
        let reformer = Reformer(
            format: .json,
            mappings: [
                .init(field: "symbol", locator: .parameter("symbol"), conversions: [.uppercase]),
                .init(field: "currency", locator: .fixed(.string("USD"))),
                .init(field: "delayed", locator: .fixed(.boolean(true))),
                .init(field: "currentPrice", locator: .jsonPointer("/last_trade_px")),
            ])
        let contract = Contract(fields: [
            .init(name: "symbol", type: .string), .init(name: "currency", type: .string), .init(name: "delayed", type: .boolean),
            .init(name: "currentPrice", type: .number),
        ])
        let result = try reformer.reform(Data(#"{"last_trade_px":1.5}"#.utf8), contract: contract, parameters: ["symbol": "aapl"])
        #expect(result.json == #"{"symbol":"AAPL","currency":"USD","delayed":true,"currentPrice":1.5}"#)
    }
}

/// The contract check: what comes out always has the contract's fields with its types, or fails.
@Suite("Reformer contract checks")
struct ContractCheckTests {
    static let contract = Contract(fields: [
        .init(name: "city", type: .string), .init(name: "temperature", type: .number),
        .init(name: "conditions", type: .string, required: false),
    ])
    static let reformer = Reformer(
        format: .json,
        mappings: [
            .init(field: "city", locator: .jsonPointer("/city")), .init(field: "temperature", locator: .jsonPointer("/t")),
            .init(field: "conditions", locator: .jsonPointer("/c")),
        ])

    @Test("an optional field may be absent; a required one may not, nor be null")
    func requiredAndOptional() throws {
        #expect(
            try Self.reformer.reform(Data(#"{"city":"Oslo","t":-3}"#.utf8), contract: Self.contract).json
                == #"{"city":"Oslo","temperature":-3}"#)
        #expect(throws: ReformError(.missingField("temperature"))) {
            try Self.reformer.reform(Data(#"{"city":"Oslo","c":"Snow"}"#.utf8), contract: Self.contract)
        }
        #expect(throws: ReformError(.missingField("city"))) {
            try Self.reformer.reform(Data(#"{"city":null,"t":1}"#.utf8), contract: Self.contract)
        }
    }

    @Test("a value of the wrong type after conversions is refused, naming the field and both types")
    func wrongType() {
        #expect(throws: ReformError(.wrongType(field: "temperature", expected: .number, found: "string"))) {
            try Self.reformer.reform(Data(#"{"city":"Oslo","t":"-3"}"#.utf8), contract: Self.contract)
        }
        #expect(throws: ReformError(.wrongType(field: "city", expected: .string, found: "boolean"))) {
            try Self.reformer.reform(Data(#"{"city":true,"t":1}"#.utf8), contract: Self.contract)
        }
        let integer = Reformer(format: .json, mappings: [.init(field: "n", locator: .jsonPointer("/n"))])
        #expect(throws: ReformError(.wrongType(field: "n", expected: .integer, found: "number"))) {
            try integer.reform(Data(#"{"n":1.5}"#.utf8), contract: Contract(fields: [.init(name: "n", type: .integer)]))
        }
    }

    @Test("objects and arrays pass through whole, in their own member order")
    func structured() throws {
        let reformer = Reformer(
            format: .json, mappings: [.init(field: "o", locator: .jsonPointer("/o")), .init(field: "a", locator: .jsonPointer("/a"))])
        let contract = Contract(fields: [.init(name: "o", type: .object), .init(name: "a", type: .array)])
        let result = try reformer.reform(Data(#"{"a":[1,"x",null,false],"o":{"z":1,"b":{"c":"d"}}}"#.utf8), contract: contract)
        #expect(result.json == #"{"o":{"b":{"c":"d"},"z":1},"a":[1,"x",null,false]}"#)
    }

    @Test("a field without a mapping is missing, unless the reformer fills only part of an aggregation")
    func partial() throws {
        let reformer = Reformer(format: .json, mappings: [.init(field: "city", locator: .jsonPointer("/city"))])
        let body = Data(#"{"city":"Oslo"}"#.utf8)
        #expect(throws: ReformError(.missingField("temperature"))) { try reformer.reform(body, contract: Self.contract) }
        let part = try reformer.reform(body, contract: Self.contract, partial: true)
        let other = ReformValue.object([("temperature", .number(2.5)), ("city", .string("ignored"))])
        let merged = ReformValue.merge([part, other], contract: Self.contract)
        #expect(merged.json == #"{"city":"Oslo","temperature":2.5}"#)
        #expect(ReformValue.missingRequired(in: merged, contract: Self.contract) == nil)
        #expect(ReformValue.missingRequired(in: part, contract: Self.contract) == "temperature")
    }

    @Test("shadow comparison names the first differing field in contract order, and none when they agree")
    func firstDifference() {
        let a = ReformValue.object([("city", .string("Oslo")), ("temperature", .integer(3))])
        let b = ReformValue.object([("city", .string("Oslo")), ("temperature", .number(3))])
        let c = ReformValue.object([("city", .string("Bergen")), ("temperature", .number(4)), ("conditions", .string("Rain"))])
        #expect(ReformValue.firstDifference(a, b, contract: Self.contract) == nil)
        #expect(ReformValue.firstDifference(a, c, contract: Self.contract) == "city")
        let d = ReformValue.object([("city", .string("Oslo")), ("temperature", .integer(3)), ("conditions", .string("Sun"))])
        #expect(ReformValue.firstDifference(a, d, contract: Self.contract) == "conditions")
    }

    @Test("strings are escaped as JSON requires")
    func escaping() {
        #expect(ReformValue.string("a\"b\\c\n\u{01}é").json == #""a\"b\\c\n\u0001é""#)
        #expect(ReformValue.number(1e20).json == "1e+20")
        #expect(ReformValue.number(-0.5).json == "-0.5")
    }
}
