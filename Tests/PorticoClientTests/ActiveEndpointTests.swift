import Foundation
import Testing

@testable import PorticoClient

/// The versionless URL at which the gateway chooses the version, derived from the locator's
/// per-version URLs as the gateway builds them, and a call's URL made from it.
@Suite("The active endpoint and a call's URL")
struct ActiveEndpointTests {
    static func document(_ entries: [(String, String, String)]) -> ServiceLocatorDocument {
        ServiceLocatorDocument(services: entries.map { .init(name: $0.0, version: $0.1, url: URL(string: $0.2)!) })
    }

    @Test("a {version} segment or an apiVersion query item is removed; one version is its own URL; anything else has none")
    func derivation() {
        let document = Self.document([
            ("quotes", "1", "https://api.example.com/gw/api/1/quotes"), ("quotes", "2", "https://api.example.com/gw/api/2/quotes"),
            ("v", "1", "https://api.example.com/api/v1/x"), ("v", "12", "https://api.example.com/api/v12/x"),
            ("echo", "1", "https://api.example.com/echo?apiVersion=1"), ("echo", "3", "https://api.example.com/echo?apiVersion=3"),
            ("solo", "4", "https://api.example.com/api/4/solo"),
            ("hosts", "1", "https://a.example.com/1/h"), ("hosts", "2", "https://b.example.com/2/h"),
            ("odd", "1", "https://api.example.com/a/1/x"), ("odd", "2", "https://api.example.com/b/2/x"),
            ("notversion", "1", "https://api.example.com/one/x"), ("notversion", "2", "https://api.example.com/two/x"),
        ])
        #expect(document.activeURL(service: "quotes")?.absoluteString == "https://api.example.com/gw/api/quotes")
        #expect(document.activeURL(service: "v")?.absoluteString == "https://api.example.com/api/x")
        #expect(document.activeURL(service: "echo")?.absoluteString == "https://api.example.com/echo")
        #expect(document.activeURL(service: "solo")?.absoluteString == "https://api.example.com/api/4/solo")
        #expect(document.activeURL(service: "hosts") == nil)
        #expect(document.activeURL(service: "odd") == nil)
        #expect(document.activeURL(service: "notversion") == nil)
        #expect(document.activeURL(service: "missing") == nil)
    }

    @Test("the path is appended as text and the query items added; only idempotent methods count as such")
    func callURL() throws {
        let base = URL(string: "https://api.example.com/api/stockquote")!
        let request = APIRequest(method: "get", service: "s", path: "/a b/50%", query: [URLQueryItem(name: "q", value: "x y")])
        #expect(try request.url(base: base).absoluteString == "https://api.example.com/api/stockquote/a%20b/50%25?q=x%20y")
        #expect(try APIRequest(method: "GET", service: "s", path: "AAPL").url(base: base).absoluteString.hasSuffix("/stockquote/AAPL"))
        #expect(try APIRequest(method: "GET", service: "s").url(base: base) == base)
        #expect(request.isIdempotent && APIRequest(method: "PUT", service: "s").isIdempotent)
        #expect(!APIRequest(method: "POST", service: "s").isIdempotent && !APIRequest(method: "PATCH", service: "s").isIdempotent)
    }
}
