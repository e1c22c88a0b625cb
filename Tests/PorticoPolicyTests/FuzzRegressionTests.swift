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

    /// `regression-duration-overflows`: a duration whose milliseconds do not fit in 64 bits
    /// (`idleTimeout: 609223372036854775807s`) trapped while converting, so `portico check` and a
    /// reload crashed instead of reporting the key. It is a diagnostic now, like any bad duration.
    @Test(arguments: ["609223372036854775807s", "1e300h", "9223372036854775808ms", "-1e300s", "nan", "infs"])
    func aDurationTooLongForSixtyFourBitsIsReported(_ duration: String) {
        let policy = "listeners:\n  - { name: l, port: 0 }\nlimits: { headTimeout: 10s, idleTimeout: \(duration) }\n"
        #expect {
            try PolicyLoader().load(sources: [(file: "regression-duration-overflows", text: policy)])
        } throws: { error in
            let diagnostics = (error as? PolicyError)?.diagnostics ?? []
            return diagnostics.count == 1 && diagnostics[0].keyPath == "limits.idleTimeout"
                && diagnostics[0].message.hasPrefix("expected a positive duration")
        }
    }

    /// The longest durations that do fit still load.
    @Test func theLongestDurationThatFitsLoads() throws {
        let policy = "listeners:\n  - { name: l, port: 0 }\nlimits: { idleTimeout: 9000000000000000s }\n"
        let snapshot = try PolicyLoader().load(sources: [(file: "long-duration", text: policy)])
        #expect(snapshot.limits.idleTimeout == .seconds(9_000_000_000_000_000))
    }
}
