import Foundation
import NIOCore
import NIOHTTP1

/// The backends the shipped default policy points at, so a newcomer can call the gateway at once.
///
/// - `quotes` answers `GET /v1/quotes/{symbol}` with a JSON quote (a stand-in for a market-data feed).
/// - `echo` answers any request with a JSON description of what it received, which makes the
///   gateway's forwarding (rewritten path, dropped and added headers) visible.
public enum DemoBackends {
    public static let quotesPort = 18081
    public static let echoPort = 18082

    /// Starts both demo backends on loopback.
    public static func start(quotesPort: Int = quotesPort, echoPort: Int = echoPort) async throws -> [BackendServer] {
        let quotes = try await BackendServer.start(port: quotesPort, handler: quotes)
        let echo = try await BackendServer.start(port: echoPort, handler: echo)
        return [quotes, echo]
    }

    static let companies = [
        "AAPL": ("Apple Inc.", 189.84), "MSFT": ("Microsoft Corporation", 415.10),
        "GOOG": ("Alphabet Inc.", 171.05), "AMZN": ("Amazon.com, Inc.", 178.22),
    ]

    @Sendable static func quotes(_ request: BackendRequest) -> BackendResponse {
        let parts = request.path.split(separator: "/")
        guard request.method == .GET || request.method == .HEAD, parts.count == 3, parts[0] == "v1", parts[1] == "quotes" else {
            return json(.notFound, ["error": "no such resource", "path": String(request.path)])
        }
        let symbol = parts[2].uppercased()
        guard let (name, price) = companies[symbol] else {
            return json(.notFound, ["error": "unknown symbol", "symbol": symbol])
        }
        return json(.ok, ["symbol": symbol, "name": name, "currentPrice": price])
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
