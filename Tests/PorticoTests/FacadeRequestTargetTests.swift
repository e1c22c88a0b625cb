import Testing

@testable import Portico

/// A facade source's request target, filled from the client's values.
@Suite("Facade request targets")
struct FacadeRequestTargetTests {
    static func target(_ template: String, _ parameters: [String: String]) -> String? {
        try? CompiledFacade.requestTarget(template, parameters: parameters).get()
    }

    @Test("values are percent-encoded; a missing one is named")
    func filled() {
        #expect(
            Self.target("/feeds/{region}/{symbol}?s={symbol}", ["region": "eu west", "symbol": "BRK/A"])
                == "/feeds/eu%20west/BRK%2FA?s=BRK%2FA")
        guard case .failure(let problem) = CompiledFacade.requestTarget("/q/{symbol}", parameters: [:]) else {
            Issue.record("a missing value was filled")
            return
        }
        #expect(problem.name == "symbol" && problem.isMissing)
    }

    @Test(
        "in the path, an empty value, '.' or '..' is refused, since the backend would resolve it to another route; in the query it is data")
    func dotSegments() {
        for value in ["", ".", ".."] {
            guard
                case .failure(let problem) = CompiledFacade.requestTarget(
                    "/feeds/{region}/{symbol}", parameters: ["region": value, "symbol": "A"])
            else {
                Issue.record("\"\(value)\" was accepted as a path segment")
                continue
            }
            #expect(problem.name == "region" && !problem.isMissing)
            #expect(Self.target("/feeds/{symbol}?region={region}", ["region": value, "symbol": "A"]) == "/feeds/A?region=\(value)")
        }
        #expect(Self.target("/feeds/{region}", ["region": "..."]) == "/feeds/...")
    }
}
