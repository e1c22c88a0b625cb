import Foundation
import PorticoPolicy
import PorticoReform
import Testing

/// Facade versions in the policy: what is read, and every mistake reported with file and key path.
@Suite("Facade policy")
struct FacadePolicyTests {
    static let backends = """
        listeners:
          - { name: main, address: 127.0.0.1, port: 8080 }
        backends:
          csv: { url: "http://127.0.0.1:9001" }
          xml: { url: "http://127.0.0.1:9002" }
        """

    static func facade(_ body: String) -> String {
        backends + "\nservices:\n  quote:\n    path: /quote\n    versions:\n      1:\n        facade:\n"
            + body.split(separator: "\n", omittingEmptySubsequences: false).map { "          " + $0 }.joined(separator: "\n")
    }

    static let valid = """
        parameters: /{symbol}
        contract: { symbol: string, price: number, note: string? }
        sources:
          a:
            backend: csv
            request: /quotes.csv?s={symbol}
            format: csv
            fields: { symbol: "0", price: { column: 2, convert: [trim, number] } }
          b:
            backend: xml
            request: /q.xml?symbol={symbol}
            format: xml
            fields: { symbol: Q/S, price: { path: Q/Last, convert: [number] }, note: { value: delayed } }
        active: a
        fallback: [b]
        shadow: b
        maxBodyBytes: 64KiB
        """

    static func errors(_ yaml: String) -> [String] {
        do {
            _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: yaml)])
            return []
        } catch {
            return error.diagnostics.map(\.description)
        }
    }

    @Test("a facade version is read with its contract, sources, locators, conversions and choices")
    func reads() throws {
        let snapshot = try PolicyLoader().load(sources: [(file: "p.yaml", text: Self.facade(Self.valid))])
        guard case .facade(let facade) = snapshot.policy.services["quote"]?.versions[1]?.handler else {
            Issue.record("not a facade")
            return
        }
        #expect(facade.contract.fields.map(\.name) == ["symbol", "price", "note"])
        #expect(facade.contract.fields.map(\.required) == [true, true, false])
        #expect(facade.sources.map(\.name) == ["a", "b"])
        #expect(facade.sources[0].fields[1] == FieldMapping(field: "price", locator: .csvIndex(2), conversions: [.trim, .number]))
        #expect(facade.sources[1].fields[2] == FieldMapping(field: "note", locator: .fixed(.string("delayed"))))
        #expect(facade.active == "a" && facade.fallback == ["b"] && facade.shadow == "b")
        #expect(facade.maxBodyBytes == 64 * 1024)
        #expect(facade.parameters == "/{symbol}")
    }

    @Test(
        "each mistake names the file and key path",
        arguments: [
            (
                "price: number, note: string?", "price: decimal",
                "p.yaml:13: services.quote.versions.1.facade.contract.price: expected a JSON type"
            ),
            ("active: a", "active: c", "services.quote.versions.1.facade.active: unknown source \"c\"; expected one of: a, b"),
            (
                "fallback: [b]", "fallback: [a]",
                "services.quote.versions.1.facade.fallback: the active source \"a\" cannot also be its own fallback"
            ),
            ("shadow: b", "shadow: a", "services.quote.versions.1.facade.shadow: the shadow source must differ"),
            ("backend: xml", "backend: json", "services.quote.versions.1.facade.sources.b.backend: unknown backend \"json\""),
            ("format: xml", "format: yaml", "services.quote.versions.1.facade.sources.b.format: expected one of json, xml, csv"),
            (
                "{ path: Q/Last,", "{ pointer: /Last,",
                "services.quote.versions.1.facade.sources.b.fields.price.pointer: pointer does not locate anything in a xml body"
            ),
            (
                "[trim, number]", "[trim, cents]",
                "services.quote.versions.1.facade.sources.a.fields.price.convert.1: expected one of number"
            ),
            (
                "symbol: \"0\", price", "symbol: ticker, price",
                "services.quote.versions.1.facade.sources.a.fields.symbol: column \"ticker\" is named, but the source has no header line"
            ),
            (
                "symbol: Q/S, ", "",
                "services.quote.versions.1.facade.sources.b.fields: source \"b\" does not fill the contract's required field \"symbol\""
            ),
            (
                "note: { value: delayed }", "extra: { value: 1 }",
                "services.quote.versions.1.facade.sources.b.fields.extra: \"extra\" is not a field of the contract"
            ),
            (
                "request: /q.xml?symbol={symbol}", "request: q.xml",
                "services.quote.versions.1.facade.sources.b.request: expected a path and query starting with one '/'"
            ),
            (
                "request: /q.xml?symbol={symbol}", "request: //other.example/q.xml",
                "services.quote.versions.1.facade.sources.b.request: expected a path and query starting with one '/'"
            ),
            ("active: a\n", "", "services.quote.versions.1.facade: expected the active source (active) or the sources merged (aggregate)"),
            (
                "shadow: b\n", "shadow: b\naggregate: [a, b]\n",
                "services.quote.versions.1.facade.aggregate: a facade has either an active source or an aggregate, not both"
            ),
        ])
    func mistakes(replacing: String, with replacement: String, expected: String) {
        let yaml = Self.facade(Self.valid.replacingOccurrences(of: replacing, with: replacement))
        let found = Self.errors(yaml)
        #expect(found.contains { $0.contains(expected) }, "expected \(expected) in \(found)")
    }

    @Test("an aggregate's parts together must fill every required field")
    func aggregateCoverage() {
        let yaml = Self.facade(
            """
            contract: { symbol: string, price: number }
            sources:
              a: { backend: csv, request: /a, format: csv, fields: { symbol: "0" } }
              b: { backend: xml, request: /b, format: xml, fields: { symbol: Q/S } }
            aggregate: [a, b]
            """)
        #expect(
            Self.errors(yaml).contains { $0.contains("facade.aggregate: no source in the aggregate fills the required field \"price\"") })
    }

    @Test("a version has exactly one handler")
    func oneHandler() {
        let yaml = Self.facade(Self.valid) + "\n        proxy: { backend: csv }"
        #expect(Self.errors(yaml).contains { $0.contains("services.quote.versions.1: expected one handler, found proxy and facade") })
    }

    @Test("switching the active source is one changed entry in the reload diff's facades section")
    func diff() throws {
        let old = try PolicyLoader().load(sources: [(file: "p.yaml", text: Self.facade(Self.valid))]).policy
        let switched = Self.valid.replacingOccurrences(of: "active: a", with: "active: b").replacingOccurrences(
            of: "fallback: [b]", with: "fallback: [a]"
        )
        .replacingOccurrences(of: "shadow: b\n", with: "")
        let new = try PolicyLoader().load(sources: [(file: "p.yaml", text: Self.facade(switched))]).policy
        let diff = PolicyDiff(from: old, to: new)
        let section = try #require(diff["facades"])
        #expect(section.added == [])
        #expect(section.removed == ["quote/1 shadow"])
        #expect(section.changed == ["quote/1 active", "quote/1 fallback"])
    }
}
