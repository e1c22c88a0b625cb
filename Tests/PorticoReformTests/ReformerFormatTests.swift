import Foundation
import PorticoReform
import Testing

/// Each format's parsing and locators, on the demo services' bodies and on the awkward cases.
@Suite("Reformer formats")
struct ReformerFormatTests {
    static let quoteV1 = Contract(fields: [
        .init(name: "symbol", type: .string), .init(name: "name", type: .string), .init(name: "currentPrice", type: .string),
    ])
    static let quoteV2 = Contract(fields: [
        .init(name: "symbol", type: .string), .init(name: "name", type: .string), .init(name: "openingPrice", type: .number),
        .init(name: "currentPrice", type: .number), .init(name: "percentageChange", type: .string),
    ])

    static let csvLine = Data(#""AAPL","Apple Inc.",530.12,-2.92%,545.31"#.utf8)
    static let xmlQuote = Data(
        "<StockQuotes><Stock><Symbol>AAPL</Symbol><Last>530.12</Last><Open>545.31</Open><PercentageChange>-2.92</PercentageChange><Name>Apple Inc.</Name></Stock></StockQuotes>"
            .utf8)

    @Test("a CSV quote line gives version 1's and version 2's contracts")
    func csvQuote() throws {
        let v1 = Reformer(
            format: .csv,
            mappings: [
                .init(field: "symbol", locator: .csvIndex(0)), .init(field: "name", locator: .csvIndex(1)),
                .init(field: "currentPrice", locator: .csvIndex(2), conversions: [.trim]),
            ])
        #expect(
            try v1.reform(Self.csvLine, contract: Self.quoteV1).json == #"{"symbol":"AAPL","name":"Apple Inc.","currentPrice":"530.12"}"#)
        let v2 = Reformer(
            format: .csv,
            mappings: [
                .init(field: "symbol", locator: .csvIndex(0)), .init(field: "name", locator: .csvIndex(1)),
                .init(field: "openingPrice", locator: .csvIndex(4), conversions: [.number]),
                .init(field: "currentPrice", locator: .csvIndex(2), conversions: [.number]),
                .init(field: "percentageChange", locator: .csvIndex(3), conversions: [.percentToNumber, .numberToPercent]),
            ])
        #expect(
            try v2.reform(Self.csvLine, contract: Self.quoteV2).json
                == #"{"symbol":"AAPL","name":"Apple Inc.","openingPrice":545.31,"currentPrice":530.12,"percentageChange":"-2.92%"}"#)
    }

    @Test("CSV quoting: separators, doubled quotes and line breaks inside quoted fields; columns by header name")
    func csvQuoting() throws {
        let body = Data("symbol,name,note\r\n\"X\",\"Smith, Jones & \"\"Co\"\"\",\"two\nlines\"\r\n".utf8)
        let reformer = Reformer(
            format: .csv,
            mappings: [
                .init(field: "symbol", locator: .csvColumn("symbol")), .init(field: "name", locator: .csvColumn("name")),
                .init(field: "note", locator: .csvColumn("note")),
            ], csvHeader: true)
        let contract = Contract(fields: [
            .init(name: "symbol", type: .string), .init(name: "name", type: .string), .init(name: "note", type: .string),
        ])
        let result = try reformer.reform(body, contract: contract)
        #expect(result["name"] == .string(#"Smith, Jones & "Co""#))
        #expect(result["note"] == .string("two\nlines"))
        #expect(result["symbol"] == .string("X"))
    }

    @Test("a CSV column past the end of the line, or a header name that is not there, is a missing field")
    func csvMissingColumn() {
        let byIndex = Reformer(format: .csv, mappings: [.init(field: "symbol", locator: .csvIndex(7))])
        let contract = Contract(fields: [.init(name: "symbol", type: .string)])
        #expect(throws: ReformError(.missingField("symbol"))) { try byIndex.reform(Self.csvLine, contract: contract) }
        let byName = Reformer(format: .csv, mappings: [.init(field: "symbol", locator: .csvColumn("ticker"))], csvHeader: true)
        #expect(throws: ReformError(.missingField("symbol"))) { try byName.reform(Data("sym\nA\n".utf8), contract: contract) }
    }

    @Test("an XML quote gives version 2's contract, the percentage turned into percent text")
    func xmlQuote() throws {
        let reformer = Reformer(
            format: .xml,
            mappings: [
                .init(field: "symbol", locator: .xmlPath("StockQuotes/Stock/Symbol")),
                .init(field: "name", locator: .xmlPath("StockQuotes/Stock/Name")),
                .init(field: "openingPrice", locator: .xmlPath("StockQuotes/Stock/Open"), conversions: [.number]),
                .init(field: "currentPrice", locator: .xmlPath("/StockQuotes/Stock/Last"), conversions: [.number]),
                .init(field: "percentageChange", locator: .xmlPath("StockQuotes/Stock/PercentageChange"), conversions: [.numberToPercent]),
            ])
        #expect(
            try reformer.reform(Self.xmlQuote, contract: Self.quoteV2).json
                == #"{"symbol":"AAPL","name":"Apple Inc.","openingPrice":545.31,"currentPrice":530.12,"percentageChange":"-2.92%"}"#)
    }

    @Test("XML namespaces are matched by local name; entities, character references and CDATA are resolved")
    func xmlNamespacesAndEntities() throws {
        let body = Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <q:Quotes xmlns:q="urn:quotes" xmlns="urn:default">
              <q:Stock q:exchange="NYSE"><Name>AT&amp;T &#x2013; &lt;Inc&gt; &quot;T&quot;</Name><Note><![CDATA[a < b]]></Note></q:Stock>
              <q:Stock q:exchange="NASDAQ"><Name>Second</Name></q:Stock>
            </q:Quotes>
            """.utf8)
        let reformer = Reformer(
            format: .xml,
            mappings: [
                .init(field: "name", locator: .xmlPath("Quotes/Stock/Name")),
                .init(field: "exchange", locator: .xmlPath("q:Quotes/q:Stock[1]/@exchange")),
                .init(field: "note", locator: .xmlPath("Quotes/Stock/Note")),
            ])
        let contract = Contract(fields: [
            .init(name: "name", type: .string), .init(name: "exchange", type: .string), .init(name: "note", type: .string),
        ])
        let result = try reformer.reform(body, contract: contract)
        #expect(result["name"] == .string("AT&T \u{2013} <Inc> \"T\""))
        #expect(result["exchange"] == .string("NASDAQ"))
        #expect(result["note"] == .string("a < b"))
    }

    @Test("an XML path whose root or element is not there is a missing field")
    func xmlMissing() {
        let contract = Contract(fields: [.init(name: "symbol", type: .string)])
        for path in ["Quotes/Stock/Symbol", "StockQuotes/Stock/Ticker", "StockQuotes/Stock[1]/Symbol"] {
            let reformer = Reformer(format: .xml, mappings: [.init(field: "symbol", locator: .xmlPath(path))])
            #expect(throws: ReformError(.missingField("symbol")), "\(path)") { try reformer.reform(Self.xmlQuote, contract: contract) }
        }
    }

    @Test("deep JSON pointers, with escaped tokens and array indices, reach both weather shapes")
    func jsonPointers() throws {
        let nested = Data(
            #"{"query":{"results":{"channel":{"location":{"city":"Zürich","region":"ZH"},"item":{"condition":{"temp":"18","text":"Partly Cloudy"}}}}},"a/b":{"m~n":[10,{"x":[true]}]}}"#
                .utf8)
        let reformer = Reformer(
            format: .json,
            mappings: [
                .init(field: "city", locator: .jsonPointer("/query/results/channel/location/city")),
                .init(
                    field: "currentTemperature", locator: .jsonPointer("/query/results/channel/item/condition/temp"), conversions: [.number]
                ),
                .init(field: "flag", locator: .jsonPointer("/a~1b/m~0n/1/x/0")),
                .init(field: "first", locator: .jsonPointer("/a~1b/m~0n/0")),
            ])
        let contract = Contract(fields: [
            .init(name: "city", type: .string), .init(name: "currentTemperature", type: .number),
            .init(name: "flag", type: .boolean), .init(name: "first", type: .integer),
        ])
        #expect(
            try reformer.reform(nested, contract: contract).json == #"{"city":"Zürich","currentTemperature":18,"flag":true,"first":10}"#)
        for pointer in ["/a~1b/m~0n/2", "/a~1b/m~0n/01", "/a~1b/m~0n/-1", "query", "/query/results/channel/item/condition/temp/x"] {
            let missing = Reformer(format: .json, mappings: [.init(field: "v", locator: .jsonPointer(pointer))])
            #expect(throws: ReformError(.missingField("v")), "\(pointer)") {
                try missing.reform(nested, contract: Contract(fields: [.init(name: "v", type: .string)]))
            }
        }
    }

    @Test("non-ASCII text survives every format and is written as UTF-8 JSON")
    func nonASCII() throws {
        let contract = Contract(fields: [.init(name: "name", type: .string)])
        let name = "Société Générale 株式会社 🚀"
        let bodies: [(Reformer, Data)] = [
            (
                Reformer(format: .json, mappings: [.init(field: "name", locator: .jsonPointer("/n"))]),
                Data(#"{"n":"Soci\u00e9t\u00e9 Générale 株式会社 🚀"}"#.utf8)
            ),
            (Reformer(format: .xml, mappings: [.init(field: "name", locator: .xmlPath("r/n"))]), Data("<r><n>\(name)</n></r>".utf8)),
            (Reformer(format: .csv, mappings: [.init(field: "name", locator: .csvIndex(1))]), Data("x,\"\(name)\"\n".utf8)),
        ]
        for (reformer, body) in bodies {
            let result = try reformer.reform(body, contract: contract)
            #expect(result.json == "{\"name\":\"\(name)\"}", "\(reformer.format)")
        }
    }

    @Test("a body over the limit is refused before parsing; malformed bodies are errors in each format")
    func oversizedAndMalformed() throws {
        let contract = Contract(fields: [.init(name: "v", type: .string)])
        let small = Reformer(format: .json, mappings: [.init(field: "v", locator: .jsonPointer("/v"))], maxBodyBytes: 16)
        #expect(throws: ReformError(.tooLarge(limit: 16))) { try small.reform(Data(#"{"v":"0123456789abcdef"}"#.utf8), contract: contract) }
        #expect(try small.reform(Data(#"{"v":"ok"}"#.utf8), contract: contract).json == #"{"v":"ok"}"#)

        let cases: [(SourceFormat, Locator, String)] = [
            (.json, .jsonPointer("/v"), #"{"v":"#),
            (.json, .jsonPointer("/v"), "not json"),
            (.xml, .xmlPath("r/v"), "<r><v>1</r>"),
            (.xml, .xmlPath("r/v"), "<r><v>&undefined;</v></r>"),
            (.xml, .xmlPath("r/v"), ""),
            (.csv, .csvIndex(0), "\"unterminated,1\n"),
            (.csv, .csvIndex(0), "x\"y,1\n"),
        ]
        for (format, locator, text) in cases {
            let reformer = Reformer(format: format, mappings: [.init(field: "v", locator: locator)])
            do {
                _ = try reformer.reform(Data(text.utf8), contract: contract)
                Issue.record("\(format) \(text) was accepted")
            } catch {
                guard case .malformed(let reported, _) = error.kind else {
                    Issue.record("\(format) \(text): \(error)")
                    continue
                }
                #expect(reported == format)
            }
        }
        let csv = Reformer(format: .csv, mappings: [.init(field: "v", locator: .csvIndex(0))])
        #expect(throws: ReformError(.malformed(format: .csv, detail: "the body is not UTF-8 text"))) {
            try csv.reform(Data([0xFF, 0xFE, 0x41]), contract: contract)
        }
    }

    @Test("deeply nested XML is refused, not walked")
    func xmlDepth() {
        let deep = String(repeating: "<a>", count: 300) + String(repeating: "</a>", count: 300)
        let reformer = Reformer(format: .xml, mappings: [.init(field: "v", locator: .xmlPath("a"))])
        #expect(throws: ReformError.self) {
            try reformer.reform(Data(deep.utf8), contract: Contract(fields: [.init(name: "v", type: .string)]))
        }
    }

    /// A document that declares a type or an entity, each of them malformed for a reformer.
    static let declaring: [(name: String, body: String)] = [
        (
            "external entity (XXE)",
            """
            <?xml version="1.0"?>
            <!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>
            <r><v>&x;</v></r>
            """
        ),
        (
            "billion laughs",
            """
            <?xml version="1.0"?>
            <!DOCTYPE r [
              <!ENTITY a "lol">
              <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
              <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
              <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
            ]>
            <r><v>&d;</v></r>
            """
        ),
        ("internal entity", #"<!DOCTYPE r [<!ENTITY name "Apple">]><r><v>&name;</v></r>"#),
        ("DOCTYPE without entities", #"<?xml version="1.0"?><!DOCTYPE r SYSTEM "http://127.0.0.1:1/r.dtd"><r><v>x</v></r>"#),
        ("lower-case, after a comment", "<!-- feed --><!doctype r><r><v>x</v></r>"),
    ]

    @Test(
        "an XML document declaring a DOCTYPE or an entity is malformed, whatever the entities would expand to",
        arguments: declaring.map(\.name))
    func xmlDeclarationsRefused(name: String) {
        let body = Self.declaring.first { $0.name == name }!.body
        let reformer = Reformer(format: .xml, mappings: [.init(field: "v", locator: .xmlPath("r/v"))])
        let contract = Contract(fields: [.init(name: "v", type: .string)])
        do {
            let value = try reformer.reform(Data(body.utf8), contract: contract)
            Issue.record("accepted: \(value.json)")
        } catch {
            guard case .malformed(.xml, let detail) = error.kind else {
                Issue.record("\(error)")
                return
            }
            #expect(detail.contains("DOCTYPE"), "\(detail)")
        }
    }

    @Test("a DOCTYPE in UTF-16 text is found too")
    func xmlDeclarationInUTF16() {
        var body = Data([0xFF, 0xFE])
        body.append(
            #"<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE r [<!ENTITY x "y">]><r><v>&x;</v></r>"#.data(using: .utf16LittleEndian)!)
        let reformer = Reformer(format: .xml, mappings: [.init(field: "v", locator: .xmlPath("r/v"))])
        #expect(throws: ReformError(.malformed(format: .xml, detail: "a DOCTYPE or ENTITY declaration is not accepted"))) {
            try reformer.reform(body, contract: Contract(fields: [.init(name: "v", type: .string)]))
        }
    }

    @Test("without a DOCTYPE, predefined entities and character references still resolve")
    func xmlPredefinedEntities() throws {
        let body = Data(#"<?xml version="1.0"?><r><v>&amp;&lt;&gt;&quot;&apos;&#x41;&#66;&#x00E9;</v></r>"#.utf8)
        let reformer = Reformer(format: .xml, mappings: [.init(field: "v", locator: .xmlPath("r/v"))])
        let value = try reformer.reform(body, contract: Contract(fields: [.init(name: "v", type: .string)]))
        #expect(value["v"] == .string("&<>\"'AB\u{E9}"))
    }
}
