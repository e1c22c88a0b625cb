import Foundation
import NIOCore
import NIOHTTP1

/// The backends the shipped default policy points at, so a newcomer can call the gateway at once.
///
/// - `quotes` answers `GET /v1/quotes/{symbol}` and `GET /v2/quotes/{symbol}` with a JSON quote in
///   stockQuote's version 1 and version 2 contracts (a stand-in for a market-data feed).
/// - `echo` answers any request with a JSON description of what it received, which makes the
///   gateway's forwarding (rewritten path, dropped and added headers) visible.
public enum DemoBackends {
    public static let quotesPort = 18081
    public static let echoPort = 18082
    /// A second instance of the quotes service: the shipped policy balances `quotes` over both.
    public static let quotesSecondPort = 18087

    /// Starts every demo backend on loopback: the quotes and echo services, the facades' feeds
    /// (see ``quotesCSV(_:)``), and the live one's WebSocket echo and ticking event stream
    /// (``LiveDemoBackend``).
    ///
    /// - Parameter host: the address they bind: loopback for the quick start; `0.0.0.0` in a
    ///   container the gateway reaches over a network (docker-compose.yml).
    public static func start(
        host: String = "127.0.0.1", quotesPort: Int = quotesPort, echoPort: Int = echoPort
    ) async throws
        -> [BackendServer]
    {
        var servers: [BackendServer] = []
        let all: [(Int, BackendServer.Handler)] = [
            (quotesPort, quotes), (echoPort, echo), (quotesCSVPort, quotesCSV), (quotesXMLPort, quotesXML),
            (weatherYQLPort, weatherYQL), (weatherRESTPort, weatherREST), (quotesSecondPort, quotes),
        ]
        do {
            for (port, handler) in all { servers.append(try await BackendServer.start(host: host, port: port, handler: handler)) }
            servers.append(try await LiveDemoBackend.start(host: host))
        } catch {
            for server in servers { try? await server.shutdown() }
            throw error
        }
        return servers
    }

    /// Name, opening price and current price of each symbol the demo knows.
    static let companies: [String: (name: String, opening: Double, current: Double)] = [
        "AAPL": ("Apple Inc.", 187.15, 189.84), "MSFT": ("Microsoft Corporation", 417.32, 415.10),
        "GOOG": ("Alphabet Inc.", 168.90, 171.05), "AMZN": ("Amazon.com, Inc.", 178.22, 178.22),
    ]

    /// `GET /v1/quotes/{symbol}`: `{"symbol","name","currentPrice"}` (stockQuote version 1's contract);
    /// `GET /v2/quotes/{symbol}`: `{"symbol","name","openingPrice","currentPrice","percentageChange"}`
    /// (version 2's), the change from opening to current price in percent, to two decimals.
    /// `GET /healthz`: 200, for the gateway's health checks.
    @Sendable public static func quotes(_ request: BackendRequest) -> BackendResponse {
        if request.path == "/healthz" { return json(.ok, ["status": "ok"]) }
        let parts = request.path.split(separator: "/")
        guard request.method == .GET || request.method == .HEAD, parts.count == 3, parts[0] == "v1" || parts[0] == "v2",
            parts[1] == "quotes"
        else {
            return json(.notFound, ["error": "no such resource", "path": String(request.path)])
        }
        let symbol = parts[2].uppercased()
        guard let company = companies[symbol] else {
            return json(.notFound, ["error": "unknown symbol", "symbol": symbol])
        }
        guard parts[0] == "v2" else {
            return json(.ok, ["symbol": symbol, "name": company.name, "currentPrice": company.current])
        }
        let change = ((company.current - company.opening) / company.opening * 10_000).rounded() / 100
        return json(
            .ok,
            [
                "symbol": symbol, "name": company.name, "openingPrice": company.opening, "currentPrice": company.current,
                "percentageChange": change,
            ])
    }

    /// Describes the request it received: method, path, query, headers and body.
    @Sendable public static func echo(_ request: BackendRequest) -> BackendResponse {
        var headers: [String: String] = [:]
        for (name, value) in request.headers {
            let key = name.lowercased()
            headers[key] = headers[key].map { "\($0), \(value)" } ?? value
        }
        return json(
            .ok,
            [
                "method": request.method.rawValue,
                "path": String(request.path),
                "query": request.query.map(String.init) ?? "",
                "headers": headers,
                "body": String(buffer: request.body),
            ])
    }

    static func json(_ status: HTTPResponseStatus, _ object: [String: Any]) -> BackendResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        return .full(status: status, headers: headers, body: ByteBuffer(bytes: data))
    }
}
