import Foundation
import Logging
import Portico
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Testing

/// The shipped facades, stockQuote and weather, over the demo feeds: each version answers its
/// contract exactly, from each of its sources, by explicit version and through the buckets.
@Suite("Demo facades")
struct DemoFacadeTests {
    static let repositoryRoot = DemoQuotesTests.repositoryRoot

    /// The feeds, in the order `policy(_:)` gives their ports.
    static let feeds: [BackendServer.Handler] = [
        DemoBackends.quotes, DemoBackends.echo, DemoBackends.quotesCSV, DemoBackends.quotesXML, DemoBackends.weatherYQL,
        DemoBackends.weatherREST,
    ]

    /// The shipped services (signatures off), with the shipped backends pointed at the test's ports.
    /// Without `caching`, weather's cache is taken out, so that every request reaches a source.
    static func policy(_ ports: [Int], swapSources: Bool = false, caching: Bool = false, weatherPorts: [Int]? = nil) -> String {
        var services = (try? String(contentsOf: repositoryRoot.appendingPathComponent("policies/services.yaml"), encoding: .utf8)) ?? ""
        services = services.replacingOccurrences(of: "auth: signature", with: "auth: none")
        if !caching { services = services.replacingOccurrences(of: "    cache: { defaultTTL: 30s, staleIfError: 10m }\n", with: "") }
        let weather = weatherPorts ?? [ports[4], ports[5]]
        if swapSources {
            for (from, to) in [
                ("active: csv", "active: XML"), ("fallback: [xml]", "fallback: [CSV]"), ("shadow: xml", "shadow: CSV"),
                ("active: yql", "active: REST"), ("fallback: [rest]", "fallback: [YQL]"), ("active: rest", "active: YQL"),
                ("fallback: [yql]", "fallback: [REST]"),
            ] {
                services = services.replacingOccurrences(of: from, with: to)
            }
            services = services.replacingOccurrences(of: ": XML", with: ": xml").replacingOccurrences(of: "[CSV]", with: "[csv]")
                .replacingOccurrences(of: ": CSV", with: ": csv").replacingOccurrences(of: ": REST", with: ": rest")
                .replacingOccurrences(of: "[YQL]", with: "[yql]").replacingOccurrences(of: ": YQL", with: ": yql")
                .replacingOccurrences(of: "[REST]", with: "[rest]")
        }
        return """
            backends:
              quotes: { url: "http://127.0.0.1:\(ports[0])" }
              echo: { url: "http://127.0.0.1:\(ports[1])" }
              quotesCSV: { url: "http://127.0.0.1:\(ports[2])" }
              quotesXML: { url: "http://127.0.0.1:\(ports[3])" }
              weatherYQL: { url: "http://127.0.0.1:\(weather[0])" }
              weatherREST: { url: "http://127.0.0.1:\(weather[1])" }
              live: { url: "http://127.0.0.1:\(ports[1])" }  # the streams' routes are WebSocketTests'
            locator:
              environments:
                production: { publicBaseURL: "https://api.example.com", listeners: [test] }
            \(services)
            """
    }

    /// Every demo service and version, and the exact body its contract gives.
    static let expected: [(path: String, body: String)] = [
        ("/api/1/stockquote/AAPL", #"{"symbol":"AAPL","name":"Apple Inc.","currentPrice":"189.84"}"#),
        ("/api/1/stockquote/MSFT", #"{"symbol":"MSFT","name":"Microsoft Corporation","currentPrice":"415.10"}"#),
        (
            "/api/2/stockquote/AAPL",
            #"{"symbol":"AAPL","name":"Apple Inc.","openingPrice":187.15,"currentPrice":189.84,"percentageChange":"1.44%"}"#
        ),
        (
            "/api/2/stockquote/MSFT",
            #"{"symbol":"MSFT","name":"Microsoft Corporation","openingPrice":417.32,"currentPrice":415.1,"percentageChange":"-0.53%"}"#
        ),
        (
            "/api/2/stockquote/AMZN",
            #"{"symbol":"AMZN","name":"Amazon.com, Inc.","openingPrice":178.22,"currentPrice":178.22,"percentageChange":"0%"}"#
        ),
        ("/api/1/weather/Portland", #"{"city":"Portland","state":"OR","currentTemperature":"12"}"#),
        ("/api/1/weather/Boston", #"{"city":"Boston","state":"MA","currentTemperature":"-2"}"#),
        ("/api/2/weather/Portland", #"{"city":"Portland","state":"OR","currentTemperature":12,"currentConditions":"Cloudy"}"#),
        ("/api/2/weather/Boston", #"{"city":"Boston","state":"MA","currentTemperature":-2,"currentConditions":"Light Snow"}"#),
    ]

    @Test("each service and version answers exactly its contract, from the active source and from the other")
    func contractsFromEachSource() async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        try await withGateway(backends: Self.feeds, logger: logger, policy: { Self.policy($0) }) { gateway, servers in
            let client = try gateway.connect()
            for (path, body) in Self.expected {
                let response = try client.request("GET", path)
                #expect(response.status == 200, "\(path): \(response.bodyText)")
                #expect(response.bodyText == body, "\(path)")
                #expect(response.header("Content-Type") == "application/json")
            }
            try gateway.reload(policy: Self.policy(servers.map(\.port), swapSources: true), accessLog: true)
            for (path, body) in Self.expected {
                let response = try client.request("GET", path)
                #expect(response.status == 200, "\(path) after the switch: \(response.bodyText)")
                #expect(response.bodyText == body, "\(path) after the switch")
            }
            // Each body came from the source meant to serve it, not from a fallback that happened
            // to agree: the access log names the active source of each phase, and no source failed.
            #expect(await eventually { recorder.records.filter { $0.message == "access" }.count == 2 * Self.expected.count })
            let sources = recorder.records.filter { $0.message == "access" }.map { $0.metadata["source"]?.description ?? "-" }
            let before = ["csv", "csv", "csv", "csv", "csv", "yql", "yql", "rest", "rest"]
            let after = ["xml", "xml", "xml", "xml", "xml", "rest", "rest", "yql", "yql"]
            #expect(sources == before + after)
            #expect(recorder.records.filter { $0.message == "facade source failed" }.isEmpty)
        }
    }

    @Test("the shipped weather service caches: one fetch per city for 30 s, and the stored answer when every source fails")
    func weatherCaches() async throws {
        let clock = ManualWallClock()
        try await withGateway(backends: Self.feeds, cacheClock: clock.function, policy: { Self.policy($0, caching: true) }) {
            gateway, servers in
            let client = try gateway.connect()
            let first = try client.request("GET", "/api/2/weather/Portland")
            #expect(first.header("Cache-Status") == "Portico; fwd=miss; stored")
            let second = try client.request("GET", "/api/2/weather/Portland")
            #expect(second.header("Cache-Status") == "Portico; hit")
            #expect(second.bodyText == first.bodyText)
            #expect(servers[4].requestsReceived + servers[5].requestsReceived == 1)
            // Every source down (the feeds' ports now refuse), 40 s later: the stored answer, within staleIfError.
            let refusing = try RefusingPort.make()
            try gateway.reload(policy: Self.policy(servers.map(\.port), caching: true, weatherPorts: [refusing, refusing]))
            clock.advance(by: 40)
            let stale = try client.request("GET", "/api/2/weather/Portland")
            #expect(stale.status == 200)
            #expect(stale.bodyText == first.bodyText)
            #expect(stale.header("Cache-Status") == "Portico; fwd=stale; detail=stale-if-error")
            #expect(try client.request("GET", "/api/2/weather/Boston").status == 502)
        }
    }

    @Test("switching the active source changes the access log's source and nothing in the responses")
    func switchingSources() async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        try await withGateway(backends: Self.feeds, logger: logger, policy: { Self.policy($0) }) { gateway, servers in
            let client = try gateway.connect()
            let before = try client.request("GET", "/api/2/stockquote/AAPL")
            let weatherBefore = try client.request("GET", "/api/1/weather/Portland")
            try gateway.reload(policy: Self.policy(servers.map(\.port), swapSources: true), accessLog: true)
            let after = try client.request("GET", "/api/2/stockquote/AAPL")
            let weatherAfter = try client.request("GET", "/api/1/weather/Portland")
            #expect(before.status == 200 && after.status == 200)
            #expect(before.bodyText == after.bodyText)
            #expect(weatherBefore.bodyText == weatherAfter.bodyText)
            #expect(before.header("X-API-Version") == after.header("X-API-Version"))
            let found = await eventually { recorder.records.filter { $0.message == "access" }.count >= 4 }
            #expect(found)
            let sources = recorder.records.filter { $0.message == "access" }.map { $0.metadata["source"]?.description ?? "-" }
            #expect(sources == ["csv", "yql", "xml", "rest"])
            let backends = recorder.records.filter { $0.message == "access" }.map { $0.metadata["backend"]?.description ?? "-" }
            #expect(backends == ["quotesCSV", "weatherYQL", "quotesXML", "weatherREST"])
        }
    }

    @Test("both versions are reachable through the buckets, and the locator lists every facade version")
    func bucketsAndLocator() async throws {
        try await withGateway(backends: Self.feeds, policy: { Self.policy($0) }) { gateway, _ in
            let client = try gateway.connect()
            let old = try client.request("GET", "/api/weather/Austin", headers: [("X-Client-Version", "1.4")])
            #expect(old.header("X-API-Version") == "1")
            #expect(old.bodyText == #"{"city":"Austin","state":"TX","currentTemperature":"31"}"#)
            let new = try client.request("GET", "/api/weather/Austin", headers: [("X-Client-Version", "2.1")])
            #expect(new.header("X-API-Version") == "2")
            #expect(new.bodyText == #"{"city":"Austin","state":"TX","currentTemperature":31,"currentConditions":"Sunny"}"#)
            let quote = try client.request("GET", "/api/stockquote/GOOG", headers: [("X-Client-Version", "1.0.0")])
            #expect(quote.header("X-API-Version") == "1")
            #expect(quote.bodyText == #"{"symbol":"GOOG","name":"Alphabet Inc.","currentPrice":"171.05"}"#)
            #expect(try client.request("GET", "/api/2/stockquote/NOPE").status == 404)
            #expect(try client.request("GET", "/api/2/weather/Nowhere").status == 404)
            let extra = try client.request("GET", "/api/2/weather/Portland/extra")
            #expect(extra.status == 404)
            #expect(extra.json?["type"] as? String == "urn:portico:problem:not-found")
            let locator = try client.request("GET", "/serviceLocator.json")
            #expect(locator.status == 200)
            for url in ["/api/1/stockquote", "/api/2/stockquote", "/api/1/weather", "/api/2/weather"] {
                #expect(locator.bodyText.contains("https://api.example.com\(url)\""), "\(url) in \(locator.bodyText)")
            }
        }
    }

    @Test("sources fetched through libcurl (the client https:// sources use) answer exactly as through the NIO client")
    func throughCurl() async throws {
        let viaCurl = { (ports: [Int]) in
            var policy = Self.policy(ports)
            for index in 2...5 {
                policy = policy.replacingOccurrences(
                    of: "\"http://127.0.0.1:\(ports[index])\" }", with: "\"http://127.0.0.1:\(ports[index])\", client: curl }")
            }
            return policy
        }
        try await withGateway(backends: Self.feeds, policy: viaCurl) { gateway, servers in
            #expect(gateway.gateway.store.current.snapshot.policy.backends["quotesCSV"]?.client == .curl)
            let client = try gateway.connect()
            for (path, body) in Self.expected {
                let response = try await offThePool { try client.request("GET", path) }
                #expect(response.bodyText == body, "\(path)")
            }
            #expect(servers[2].requestsReceived > 0 && servers[5].requestsReceived > 0)
        }
    }
}
