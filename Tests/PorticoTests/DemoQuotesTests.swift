import Foundation
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Testing

/// The quick start's stockQuote: two versions with their own contracts, served by the demo quotes
/// backend's `/v1` and `/v2` routes, and the shipped policy's buckets choosing between them.
@Suite("Demo stockQuote versions")
struct DemoQuotesTests {
    static let repositoryRoot = Repository.root

    /// The shipped policy's stockQuote, without its signature requirement; since the facades
    /// issue its versions are facades over the CSV and XML feeds (``DemoFacadeTests/feeds``).
    static func policy(_ ports: [Int]) throws -> String {
        DemoFacadeTests.policy(ports)
    }

    @Test("the shipped policy maps apps before 2.0.0 to version 1, later ones to 2, and refuses apps before 1.0.0")
    func shippedBuckets() throws {
        let snapshot = try PolicyLoader().load(directory: Self.repositoryRoot.appendingPathComponent("policies").path)
        let service = try #require(snapshot.policy.services["stockQuote"])
        #expect(service.versions.keys.sorted() == [1, 2])
        #expect(service.compatibility.map { "\($0.clients) → \($0.version)" } == ["<2.0.0 → 1", ">=2.0.0 → 2"])
        #expect(service.minimumClientVersion.map(ClientVersion.describe) == "1.0.0")
        #expect(service.defaultVersion == .latest)
        #expect(snapshot.warnings.allSatisfy { !$0.keyPath.contains("compatibility") }, "\(snapshot.warnings)")
    }

    @Test("version 1 and version 2 answer in their own contracts, chosen by path or by app version")
    func contracts() async throws {
        try await withGateway(backends: DemoFacadeTests.feeds, policy: { ports in (try? Self.policy(ports)) ?? "" }) { gateway, _ in
            let client = try gateway.connect()
            let v1 = try client.request("GET", "/api/1/stockquote/AAPL")
            #expect(v1.status == 200)
            #expect(v1.json?.keys.sorted() == ["currentPrice", "name", "symbol"])
            let v2 = try client.request("GET", "/api/2/stockquote/aapl")
            #expect(v2.status == 200)
            #expect(v2.json?.keys.sorted() == ["currentPrice", "name", "openingPrice", "percentageChange", "symbol"])
            #expect(v2.json?["symbol"] as? String == "AAPL")
            let opening = try #require(v2.json?["openingPrice"] as? Double)
            let current = try #require(v2.json?["currentPrice"] as? Double)
            // The facade's version 2 contract: percent text, such as "-2.92%".
            let percent = try #require(v2.json?["percentageChange"] as? String)
            #expect(percent.hasSuffix("%"))
            let change = try #require(Double(percent.dropLast()))
            #expect(abs(change - (current - opening) / opening * 100) < 0.005)

            let oldApp = try client.request("GET", "/api/stockquote/MSFT", headers: [("X-Client-Version", "1.8.2")])
            #expect(oldApp.header("X-API-Version") == "1")
            #expect(oldApp.json?.keys.sorted() == ["currentPrice", "name", "symbol"])
            let newApp = try client.request("GET", "/api/stockquote/MSFT", headers: [("X-Client-Version", "2.0")])
            #expect(newApp.header("X-API-Version") == "2")
            #expect(newApp.json?["percentageChange"] != nil)
            #expect(try client.request("GET", "/api/stockquote/MSFT").header("X-API-Version") == "2")
            #expect(try client.request("GET", "/api/stockquote/MSFT", headers: [("X-Client-Version", "0.9")]).status == 426)
            #expect(try client.request("GET", "/api/3/stockquote/MSFT").status == 404)
            #expect(try client.request("GET", "/api/2/stockquote/NOPE").status == 404)
        }
    }
}
