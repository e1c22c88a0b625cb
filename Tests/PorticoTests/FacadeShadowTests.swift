import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// Shadow comparison: a candidate source fetched beside the active one, compared field by field,
/// counted, and never in the client's way.
@Suite("Facade shadow comparison")
struct FacadeShadowTests {
    /// `first` (JSON on `primary`) serves; `second` (CSV on `candidate`) is its shadow.
    static func policy(primary: Int, candidate: Int, candidateTimeout: String = "5s", limited: Bool = true) -> String {
        """
        backends:
          primary: { url: "http://127.0.0.1:\(primary)" }
          candidate: { url: "http://127.0.0.1:\(candidate)", timeout: \(candidateTimeout)\(limited ? ", rateLimit: { rate: 1/h, burst: 2 }" : "") }
        services:
          quote:
            path: /quote
            versions:
              1:
                facade:
                  parameters: /{symbol}
                  contract: { symbol: string, price: number }
                  sources:
                    first: { backend: primary, request: "/q/{symbol}", format: json, fields: { symbol: /symbol, price: /price } }
                    second:
                      backend: candidate
                      request: /quotes.csv?s={symbol}
                      format: csv
                      fields: { symbol: "0", price: { column: 2, convert: [number] } }
                  active: first
                  shadow: second
        """
    }

    static func primary(price: String) -> BackendServer.Handler {
        { _ in
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            return .full(status: .ok, headers: headers, body: ByteBuffer(string: #"{"symbol":"AAPL","price":\#(price)}"#))
        }
    }

    static func count(_ result: String, in gateway: TestGateway) -> Int? {
        let prefix = "portico_facade_shadow_total{result=\"\(result)\"} "
        guard let line = gateway.gateway.metrics.render().split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
        return Int(line.dropFirst(prefix.count))
    }

    @Test("agreements and mismatches are counted; a mismatch logs its first differing field; the client gets the active result")
    func agreementAndMismatch() async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        let agreeing = try await BackendServer.start(handler: Self.primary(price: "189.84"))
        let differing = try await BackendServer.start(handler: Self.primary(price: "190"))
        let candidate = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        let snapshot = try TestGateway.snapshot(policy: Self.policy(primary: agreeing.port, candidate: candidate.port))
        let gateway = Gateway(snapshot: snapshot, logger: logger)
        try await gateway.start()
        let test = TestGateway(gateway: gateway, port: gateway.boundPorts["test"]!)
        let agreed = try test.connect().request("GET", "/quote/AAPL")
        #expect(agreed.bodyText == #"{"symbol":"AAPL","price":189.84}"#)
        #expect(await eventually { Self.count("agree", in: test) == 1 })

        try test.reload(policy: Self.policy(primary: differing.port, candidate: candidate.port))
        let mismatched = try test.connect().request("GET", "/quote/AAPL")
        #expect(mismatched.bodyText == #"{"symbol":"AAPL","price":190}"#)
        #expect(await eventually { Self.count("mismatch", in: test) == 1 })
        #expect(Self.count("agree", in: test) == 1)
        #expect(candidate.requestsReceived == 2)
        let logged = recorder.records.first { $0.message == "facade shadow mismatch" }
        #expect(logged?.metadata["field"]?.description == "price")
        #expect(logged?.metadata["shadow"]?.description == "second")

        // The shadow's fetches count against its backend's limit (burst 2): the third is refused.
        _ = try test.connect().request("GET", "/quote/AAPL")
        #expect(await eventually { Self.count("shadow_failed", in: test) == 1 })
        #expect(candidate.requestsReceived == 2)
        await gateway.shutdown()
        for server in [agreeing, differing, candidate] { try await server.shutdown() }
    }

    @Test("a shadow that never answers, or is down, does not hold up or fail the client's answer")
    func slowOrDeadShadow() async throws {
        let primary = try await BackendServer.start(handler: Self.primary(price: "189.84"))
        // Holds every request, its connection open, until the gateway gives up on it (120 s) or
        // the test ends.
        let hanging = try await ScriptedBackend.start { _ in [] }
        let gateway = try await TestGateway.start(
            policy: Self.policy(primary: primary.port, candidate: hanging.port, candidateTimeout: "120s", limited: false))
        let client = try gateway.connect(receiveTimeout: 60)
        for _ in 0..<3 {
            let response = try client.request("GET", "/quote/AAPL")
            #expect(response.status == 200)
            #expect(response.bodyText == #"{"symbol":"AAPL","price":189.84}"#)
        }
        // Each shadow fetch was sent before its request's active answer was written (both start
        // together), and all three are still held: the client had every answer while the shadow
        // backend still held every request. Nothing was counted yet: no shadow has finished.
        #expect(try await hanging.waitUntil { $0.requestsReceived == 3 })
        #expect(hanging.connectionsClosed == 0)
        #expect(Self.count("shadow_failed", in: gateway) == 0)
        #expect(Self.count("agree", in: gateway) == 0)
        let deadPort = try RefusingPort.make()
        try gateway.reload(policy: Self.policy(primary: primary.port, candidate: deadPort, limited: false))
        let response = try client.request("GET", "/quote/AAPL")
        #expect(response.status == 200)
        #expect(response.bodyText == #"{"symbol":"AAPL","price":189.84}"#)
        #expect(await eventually { Self.count("shadow_failed", in: gateway) == 1 })
        await gateway.shutdown()
        try await primary.shutdown()
        try await hanging.shutdown()
    }
}

/// Aggregation: parts fetched in parallel and merged; a failed part is left out, and the answer
/// stands only if the parts left fill every required field.
@Suite("Facade aggregation")
struct FacadeAggregationTests {
    static func policy(places: Int, temperatures: Int) -> String {
        """
        backends:
          places: { url: "http://127.0.0.1:\(places)" }
          temperatures: { url: "http://127.0.0.1:\(temperatures)" }
        services:
          weather:
            path: /weather
            versions:
              1:
                facade:
                  parameters: /{city}
                  contract: { city: string, state: string, currentTemperature: number, currentConditions: string? }
                  sources:
                    place: { backend: places, request: "/weather/{city}", format: json, fields: { city: /location/city, state: /location/state } }
                    reading:
                      backend: temperatures
                      request: /v1/public/yql?city={city}
                      format: json
                      fields:
                        currentTemperature: { pointer: /query/results/channel/item/condition/temp, convert: [number] }
                        currentConditions: /query/results/channel/item/condition/text
                  aggregate: [place, reading]
        """
    }

    @Test("both parts merge into one contract object, in the contract's order")
    func merges() async throws {
        try await withGateway(
            backends: [DemoBackends.weatherREST, DemoBackends.weatherYQL], policy: { Self.policy(places: $0[0], temperatures: $0[1]) }
        ) { gateway, servers in
            let response = try gateway.connect().request("GET", "/weather/Austin")
            #expect(response.status == 200)
            #expect(response.bodyText == #"{"city":"Austin","state":"TX","currentTemperature":31,"currentConditions":"Sunny"}"#)
            #expect(servers.allSatisfy { $0.requestsReceived == 1 })
        }
    }

    @Test("a failed part that held a required field gives a 502 naming the field and that part")
    func failedPart() async throws {
        try await withGateway(
            backends: [DemoBackends.weatherREST, { _ in .full(status: .internalServerError, headers: HTTPHeaders(), body: ByteBuffer()) }],
            policy: { Self.policy(places: $0[0], temperatures: $0[1]) }
        ) { gateway, _ in
            let response = try gateway.connect().request("GET", "/weather/Austin")
            #expect(response.status == 502)
            #expect(response.json?["field"] as? String == "currentTemperature")
            #expect(response.json?["source"] as? String == "reading")
        }
    }

    @Test("a failed part that held only optional fields leaves them out")
    func optionalPart() async throws {
        let policy = { (ports: [Int]) in
            Self.policy(places: ports[0], temperatures: ports[1])
                .replacingOccurrences(of: "currentTemperature: number", with: "currentTemperature: number?")
        }
        try await withGateway(
            backends: [DemoBackends.weatherREST, { _ in .close }], policy: policy
        ) { gateway, _ in
            let response = try gateway.connect().request("GET", "/weather/Boston")
            #expect(response.status == 200)
            #expect(response.bodyText == #"{"city":"Boston","state":"MA"}"#)
        }
    }
}

/// Handlers written in Swift, registered at start-up.
@Suite("Code handlers")
struct CodeHandlerTests {
    /// The documented example's shape: a field computed from a backend's answer.
    struct Spread: CodeHandler {
        func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse> {
            let symbol = request.remainder.split(separator: "/").first.map(String.init) ?? ""
            return context.fetch(backend: "quotes", target: "/v2/quotes/\(symbol)").map { fetched in
                guard fetched.status == 200, let quote = try? JSONSerialization.jsonObject(with: fetched.body) as? [String: Any],
                    let open = quote["openingPrice"] as? Double, let last = quote["currentPrice"] as? Double
                else { return .json(status: 502, ["error": "quotes gave no usable answer"]) }
                return .json(status: 200, ["symbol": symbol, "spread": ((last - open) * 100).rounded() / 100])
            }
        }
    }

    @Test("a code version is served by its registered handler, which calls its backend through the gateway")
    func registered() async throws {
        let quotes = try await BackendServer.start(handler: DemoBackends.quotes)
        let snapshot = try TestGateway.snapshot(
            policy: """
                backends:
                  quotes: { url: "http://127.0.0.1:\(quotes.port)" }
                  echo: { url: "http://127.0.0.1:\(quotes.port)" }
                services:
                  spread:
                    path: /spread
                    versions:
                      1: { code: { name: spread, backends: [quotes] } }
                      2: { code: { name: unregistered } }
                      3: { code: { name: nosy, backends: [quotes] } }
                """)
        struct Nosy: CodeHandler {
            func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse> {
                context.fetch(backend: "echo", target: "/").map { _ in .json(status: 200, [:]) }
            }
        }
        let gateway = Gateway(snapshot: snapshot, codeHandlers: ["spread": Spread(), "nosy": Nosy()])
        try await gateway.start()
        let client = try RawHTTPClient(port: gateway.boundPorts["test"]!, receiveTimeout: 10)
        let response = try client.request("GET", "/spread/AAPL?apiVersion=1")
        #expect(response.status == 200)
        #expect(response.bodyText == #"{"spread":2.69,"symbol":"AAPL"}"#)
        #expect(response.header("X-API-Version") == "1")
        #expect(try client.request("GET", "/spread/AAPL?apiVersion=2").status == 501)
        // A backend the policy does not give the handler is refused; the handler's failure is a 500.
        #expect(try client.request("GET", "/spread/AAPL?apiVersion=3").status == 500)
        #expect(quotes.requestsReceived == 1)
        await gateway.shutdown()
        try await quotes.shutdown()
    }
}
