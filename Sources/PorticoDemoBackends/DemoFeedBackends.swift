import Foundation
import NIOCore
import NIOHTTP1

/// The feeds behind the demo facades: the same market and weather data in the shapes real
/// providers use, so that the facades have something to reform.
///
/// - `quotesCSV`: `GET /quotes.csv?s=AAPL` → `"AAPL","Apple Inc.",189.84,1.44%,187.15`
///   (symbol, name, last, percentage change, open), a CSV line as the old finance feeds gave.
/// - `quotesXML`: `GET /quotes.xml?symbol=AAPL` → `<StockQuotes><Stock><Symbol>…` with `Last`,
///   `Open`, `PercentageChange` (a bare number) and `Name`.
/// - `weatherYQL`: `GET /v1/public/yql?city=Portland` → the data nested in
///   `query.results.channel`, `item.condition` (`temp` as text, `text`) and `location`.
/// - `weatherREST`: `GET /weather/Portland` → `{"location":{…},"condition":{"temperature":12,"text":…}}`.
///
/// Each derives from one table, so the sources of a facade agree (and a shadow comparison says so).
extension DemoBackends {
    public static let quotesCSVPort = 18083
    public static let quotesXMLPort = 18084
    public static let weatherYQLPort = 18085
    public static let weatherRESTPort = 18086

    /// City → state, temperature in °C, conditions.
    static let cities: [String: (state: String, temperature: Int, conditions: String)] = [
        "Portland": ("OR", 12, "Cloudy"), "Austin": ("TX", 31, "Sunny"), "Boston": ("MA", -2, "Light Snow"),
    ]

    /// The change from opening to current price in percent, to two decimals, as text (`-2.92`).
    static func percentageChange(_ company: (name: String, opening: Double, current: Double)) -> String {
        String(format: "%.2f", ((company.current - company.opening) / company.opening * 10_000).rounded() / 100)
    }

    static func price(_ value: Double) -> String { String(format: "%.2f", value) }

    @Sendable public static func quotesCSV(_ request: BackendRequest) -> BackendResponse {
        guard request.path == "/quotes.csv", let symbol = queryValue("s", in: request)?.uppercased() else {
            return text(.notFound, "no such resource\n", type: "text/plain")
        }
        guard let company = companies[symbol] else { return text(.notFound, "unknown symbol\n", type: "text/plain") }
        let line =
            "\"\(symbol)\",\"\(company.name)\",\(price(company.current)),\(percentageChange(company))%,\(price(company.opening))\r\n"
        return text(.ok, line, type: "text/csv; charset=utf-8")
    }

    @Sendable public static func quotesXML(_ request: BackendRequest) -> BackendResponse {
        guard request.path == "/quotes.xml", let symbol = queryValue("symbol", in: request)?.uppercased() else {
            return text(.notFound, "<error>no such resource</error>", type: "application/xml")
        }
        guard let company = companies[symbol] else { return text(.notFound, "<error>unknown symbol</error>", type: "application/xml") }
        let name = company.name.replacingOccurrences(of: "&", with: "&amp;")
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <StockQuotes><Stock><Symbol>\(symbol)</Symbol><Last>\(price(company.current))</Last><Open>\(price(company.opening))</Open>\
            <PercentageChange>\(percentageChange(company))</PercentageChange><Name>\(name)</Name></Stock></StockQuotes>
            """
        return text(.ok, xml, type: "application/xml; charset=utf-8")
    }

    @Sendable public static func weatherYQL(_ request: BackendRequest) -> BackendResponse {
        guard request.path == "/v1/public/yql", let city = queryValue("city", in: request), let weather = cities[city] else {
            return json(.notFound, ["error": "unknown city"])
        }
        return json(
            .ok,
            [
                "query": [
                    "count": 1,
                    "results": [
                        "channel": [
                            "location": ["city": city, "region": weather.state, "country": "United States"],
                            "item": ["condition": ["temp": String(weather.temperature), "text": weather.conditions, "code": "26"]],
                        ]
                    ],
                ]
            ])
    }

    @Sendable public static func weatherREST(_ request: BackendRequest) -> BackendResponse {
        let parts = request.path.split(separator: "/")
        guard parts.count == 2, parts[0] == "weather", let city = String(parts[1]).removingPercentEncoding, let weather = cities[city]
        else {
            return json(.notFound, ["error": "unknown city"])
        }
        return json(
            .ok,
            [
                "location": ["city": city, "state": weather.state],
                "condition": ["temperature": weather.temperature, "text": weather.conditions, "unit": "C"],
            ])
    }

    static func queryValue(_ name: String, in request: BackendRequest) -> String? {
        guard let query = request.query else { return nil }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == name { return String(parts[1]).removingPercentEncoding }
        }
        return nil
    }

    static func text(_ status: HTTPResponseStatus, _ body: String, type: String) -> BackendResponse {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: type)
        return .full(status: status, headers: headers, body: ByteBuffer(string: body))
    }
}
