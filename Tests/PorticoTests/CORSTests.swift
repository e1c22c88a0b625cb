import Foundation
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

@testable import Portico

@Suite("CORS: preflights answered by the gateway, one Access-Control-Allow-Origin, and a real browser")
struct CORSTests {
    static let secret = "cors-app-secret-0123456789abcdefghijklmnopqrstuvwxyz"
    static let app = "https://app.example.com"

    /// `orders` takes an API key and lets the app's pages send credentials; `public` lets any page
    /// read it; `plain` has no cors at all. The backend (first port) adds its own CORS fields.
    static func policy(_ ports: [Int], pageOrigin: String = app) -> String {
        """
        apiKeys: { header: X-API-Key }
        backends:
          origin: { url: "http://127.0.0.1:\(ports[0])" }
        services:
          orders:
            path: /orders
            auth: apiKey
            cors: { origins: ["\(pageOrigin)"], methods: [GET, PUT], headers: [X-Trace, X-API-Key], exposeHeaders: [X-Request-Id], credentials: true, maxAge: 600 }
            versions: { 1: { proxy: { backend: origin } } }
          public:
            path: /public
            cors: { origins: ["*"] }
            versions: { 1: { proxy: { backend: origin } } }
          plain:
            path: /plain
            versions: { 1: { proxy: { backend: origin } } }
        tiers:
          roomy: { rate: 1000/s, burst: 1000 }
        keys:
          app: { secret: "\(secret)", demo: true, services: ["*"], tier: roomy }
        """
    }

    /// A backend that answers JSON with CORS fields of its own (which the gateway must replace).
    static let backend: BackendServer.Handler = { request in
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "access-control-allow-origin", value: "*")
        headers.add(name: "access-control-allow-credentials", value: "false")
        return .full(status: .ok, headers: headers, body: ByteBuffer(string: #"{"method":"\#(request.method.rawValue)"}"#))
    }

    @Test("a preflight is answered before authentication, without the backend: allowed, or 403 for an origin, method or field not allowed")
    func preflight() async throws {
        try await withGateway(backends: [Self.backend], policy: { Self.policy($0) }) { gateway, servers in
            let client = try gateway.connect()
            let allowed = try client.request(
                "OPTIONS", "/orders/7",
                headers: [
                    ("Origin", Self.app), ("Access-Control-Request-Method", "PUT"),
                    ("Access-Control-Request-Headers", "x-trace, content-type"),
                ])
            #expect(allowed.status == 204)
            #expect(allowed.headers.filter { $0.0.lowercased() == "access-control-allow-origin" }.map(\.1) == [Self.app])
            #expect(allowed.header("Access-Control-Allow-Credentials") == "true")
            #expect(allowed.header("Access-Control-Allow-Methods") == "GET, HEAD, POST, PUT")
            #expect(allowed.header("Access-Control-Allow-Headers") == "x-trace, content-type")
            #expect(allowed.header("Access-Control-Max-Age") == "600")
            #expect(allowed.headers.contains { $0.0 == "Vary" && $0.1 == "Origin" })
            for (origin, method, fields) in [
                ("https://evil.example", "PUT", ""), (Self.app, "DELETE", ""), (Self.app, "PUT", "x-secret"),
            ] {
                let refused = try client.request(
                    "OPTIONS", "/orders/7",
                    headers: [("Origin", origin), ("Access-Control-Request-Method", method), ("Access-Control-Request-Headers", fields)])
                #expect(refused.status == 403, "\(origin) \(method) \(fields)")
                #expect(refused.json?["type"] as? String == "urn:portico:problem:cors-refused")
                #expect(refused.header("Access-Control-Allow-Origin") == (origin == Self.app ? Self.app : nil))
            }
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("an answer carries Access-Control-Allow-Origin exactly once, the gateway's, whatever the backend sends; errors too")
    func actualRequests() async throws {
        try await withGateway(backends: [Self.backend], policy: { Self.policy($0) }) { gateway, _ in
            let client = try gateway.connect()
            let ok = try client.request("GET", "/orders/7", headers: [("Origin", Self.app), ("X-API-Key", "app.\(Self.secret)")])
            #expect(ok.status == 200)
            #expect(ok.headers.filter { $0.0.lowercased() == "access-control-allow-origin" }.map(\.1) == [Self.app])
            #expect(ok.headers.filter { $0.0.lowercased() == "access-control-allow-credentials" }.map(\.1) == ["true"])
            #expect(ok.header("Access-Control-Expose-Headers") == "X-Request-Id")
            // Without its key: the 401 is readable by the page.
            let unauthorized = try client.request("GET", "/orders/7", headers: [("Origin", Self.app)])
            #expect(unauthorized.status == 401)
            #expect(unauthorized.header("Access-Control-Allow-Origin") == Self.app)
            // Another origin: no grant at all, and the backend's own is gone.
            let other = try client.request(
                "GET", "/orders/7", headers: [("Origin", "https://evil.example"), ("X-API-Key", "app.\(Self.secret)")])
            #expect(other.status == 200)
            #expect(other.header("Access-Control-Allow-Origin") == nil)
            // Any origin, no credentials: `*`.
            let any = try client.request("GET", "/public/x", headers: [("Origin", "https://anyone.example")])
            #expect(any.headers.filter { $0.0.lowercased() == "access-control-allow-origin" }.map(\.1) == ["*"])
            #expect(any.header("Access-Control-Allow-Credentials") == nil)
            // A service without cors passes the backend's fields through untouched.
            let plain = try client.request("GET", "/plain/x", headers: [("Origin", Self.app)])
            #expect(plain.header("Access-Control-Allow-Origin") == "*")
        }
    }

    @Test("portico check refuses origins: [\"*\"] with credentials, and an origin with a path")
    func policyChecks() {
        let base = "listeners:\n  - { name: p, port: 0 }\nbackends:\n  o: { url: \"http://127.0.0.1:9\" }\nservices:\n"
        for (cors, message) in [
            (#"{ origins: ["*"], credentials: true }"#, "credentials: true cannot go with origins: [\"*\"]"),
            (#"{ origins: ["https://app.example.com/x"] }"#, "expected an origin such as https://app.example.com"),
        ] {
            let yaml = base + "  s: { path: /s, cors: \(cors), versions: { 1: { proxy: { backend: o } } } }\n"
            do {
                _ = try PolicyLoader().load(sources: [(file: "p.yaml", text: yaml)])
                Issue.record("accepted \(cors)")
            } catch {
                #expect(
                    error.diagnostics.contains { $0.description.contains("services.s.cors") && $0.description.contains(message) },
                    "\(error)")
            }
        }
    }

    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(
        "headless Chromium on one origin calling the gateway on another: allowed, preflighted and with credentials; refused where the policy says",
        .enabled(if: chromium != nil, "chromium is not installed (scripts/install-deps.sh installs it)"))
    func browser() async throws {
        let gatewayPort = Mutex<Int>(0)
        let page: BackendServer.Handler = { _ in
            let base = "http://127.0.0.1:\(gatewayPort.withLock { $0 })"
            let html = """
                <!doctype html><html><body><pre id="out">pending</pre><script>
                const key = "app.\(Self.secret)";
                async function attempt(name, url, init) {
                  try { const r = await fetch(url, init); const t = await r.text(); return name + "=" + r.status + ":" + t; }
                  catch (e) { return name + "=blocked"; }
                }
                (async () => {
                  const results = [];
                  results.push(await attempt("simple", "\(base)/public/a", {}));
                  results.push(await attempt("preflighted", "\(base)/orders/1", {method: "PUT", headers: {"X-Trace": "1", "X-API-Key": key}}));
                  results.push(await attempt("credentials", "\(base)/orders/2", {credentials: "include", headers: {"X-API-Key": key}}));
                  results.push(await attempt("wildcardWithCredentials", "\(base)/public/b", {credentials: "include"}));
                  results.push(await attempt("fieldNotAllowed", "\(base)/orders/3", {headers: {"X-Secret": "1", "X-API-Key": key}}));
                  results.push(await attempt("noCors", "\(base)/plain/c", {method: "PUT"}));
                  document.getElementById("out").textContent = results.join("|");
                })();
                </script></body></html>
                """
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "text/html; charset=utf-8")
            return .full(status: .ok, headers: headers, body: ByteBuffer(string: html))
        }
        try await withGateway(
            backends: [Self.backend, page], policy: { Self.policy($0, pageOrigin: "http://127.0.0.1:\($0[1])") }
        ) { gateway, servers in
            gatewayPort.withLock { $0 = gateway.port }
            let profile = FileManager.default.temporaryDirectory.appendingPathComponent("portico-chromium-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: profile) }
            let result = try await offThePool {
                try ChildProcess.run(
                    "/usr/bin/timeout",
                    [
                        "90", Self.chromium!, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                        "--user-data-dir=\(profile)", "--virtual-time-budget=20000", "--dump-dom",
                        "http://127.0.0.1:\(servers[1].port)/page.html",
                    ])
            }
            let dom = String(decoding: result.output, as: UTF8.self)
            let out = dom.components(separatedBy: "<pre id=\"out\">").dropFirst().first?.components(separatedBy: "</pre>").first ?? ""
            let results = Dictionary(
                uniqueKeysWithValues: out.split(separator: "|").compactMap { entry -> (String, String)? in
                    let parts = entry.split(separator: "=", maxSplits: 1)
                    return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
                })
            #expect(results["simple"] == #"200:{"method":"GET"}"#, "\(out)")
            #expect(results["preflighted"] == #"200:{"method":"PUT"}"#, "\(out)")
            #expect(results["credentials"] == #"200:{"method":"GET"}"#, "\(out)")
            #expect(results["wildcardWithCredentials"] == "blocked", "\(out)")
            #expect(results["fieldNotAllowed"] == "blocked", "\(out)")
            #expect(results["noCors"] == "blocked", "\(out)")
        }
    }
}
