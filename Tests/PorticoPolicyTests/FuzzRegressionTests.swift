import PorticoPolicy
import Testing

/// Inputs the libFuzzer targets under `fuzz/` crashed on, kept so that the crash stays fixed. Each
/// input is also in the target's seed corpus (`fuzz/corpus/FuzzPolicyLoader/`), under the same name.
@Suite("Fuzz regressions: policies")
struct FuzzRegressionTests {
    /// `regression-path-ends-inside-route`: routing `/api` or `/api/1` against the route
    /// `/api/{version}/stockquote` read past the end of the path and trapped, which took the whole
    /// gateway down on a one-line request.
    @Test func aPathThatEndsInsideARouteMatchesNothing() throws {
        let policy = """
            services:
              stockQuote:
                path: /api/{version}/stockquote
                versions:
                  1: { proxy: { backend: quotes } }
            backends:
              quotes: { url: "http://127.0.0.1:9" }
            listeners:
              - { name: l, port: 0 }

            """
        let routes = try PolicyLoader().load(sources: [(file: "regression-path-ends-inside-route", text: policy)]).routes
        for path in ["/", "/api", "/api/", "/api/1", "/api/1/", "/api/1/stock"] {
            #expect(routes.match(path: path[...], host: nil) == nil, "\(path)")
        }
        let match = try #require(routes.match(path: "/api/1/stockquote/AAPL", host: nil))
        #expect(match.path.version == "1")
        #expect(match.path.remainder == "/AAPL")
    }
}
