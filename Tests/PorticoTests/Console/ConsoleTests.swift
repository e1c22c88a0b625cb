import Foundation
import NIOHTTP1
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

@testable import Portico

/// The operator console: its page and data on the admin listener, who may use them, and the page
/// itself in headless Chromium against a gateway serving traffic.
@Suite("The operator console")
struct ConsoleTests {
    /// `PolicyReloadTests.files`, with compatibility buckets on `svc` (one of them iPad's own).
    static func files(_ ports: [Int]) -> [String: String] {
        var files = PolicyReloadTests.files(ports)
        files["services.yaml"] = """
            services:
              svc:
                path: /svc
                auth: apiKey
                versions:
                  1: { proxy: { backend: alpha } }
                  2: { proxy: { backend: beta } }
                compatibility:
                  - { clients: "<2.0.0", version: 1 }
                  - { clients: ">=2.0.0", version: 2 }
                  - { clients: ">=1.5.0", platforms: [ipad], version: 2 }
              other:
                path: /other
                versions:
                  1: { proxy: { backend: beta } }
            """
        return files
    }

    static let key = "k1.\(PolicyReloadTests.secretOne)"

    @Test("GET / serves the page with a strict policy; its data holds ids and counts, never a secret")
    func pageAndData() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, _ in
            let page = try await offThePool { try gateway.adminRequest("GET", "/") }
            #expect(page.status == 200 && page.header("content-type") == "text/html; charset=utf-8")
            let policy = try #require(page.header("content-security-policy"))
            #expect(policy.contains("default-src 'self'") && policy.contains("script-src 'self'") && !policy.contains("unsafe"))
            #expect(page.header("x-frame-options") == "DENY" && page.header("cache-control") == "no-store")
            #expect(!page.bodyText.contains("<script>") && !page.bodyText.contains("style="), "no inline script or style")
            let token = try #require(Self.pageToken(page.bodyText))
            #expect(token.count == 64)
            for asset in ["/console/console.js", "/console/console.css"] {
                let file = try await offThePool { try gateway.adminRequest("GET", asset) }
                #expect(file.status == 200 && file.header("content-security-policy") != nil, "\(asset)")
            }

            for index in 0..<3 {
                let answer = try RawHTTPClient(port: gateway.port).request(
                    "GET", "/svc/\(index)", headers: [("X-API-Key", Self.key), ("X-Client-Version", "2.1.0")])
                #expect(answer.status == 200)
            }
            #expect(try RawHTTPClient(port: gateway.port).request("GET", "/svc/x").status == 401)
            let state = try await offThePool { try gateway.adminRequest("GET", "/admin/console") }
            #expect(state.status == 200 && state.header("cache-control") == "no-store")
            let json = try #require(state.json)
            let facts = try #require(json["gateway"] as? [String: Any])
            #expect(facts["generation"] as? Int == 0 && facts["ready"] as? Bool == true)
            #expect((facts["listeners"] as? [[String: Any]])?.first?["name"] as? String == "test")
            let services = try #require(json["services"] as? [[String: Any]])
            let svc = try #require(services.first { $0["name"] as? String == "svc" })
            #expect((svc["buckets"] as? [[String: Any]])?.count == 3)
            let series = try #require((json["traffic"] as? [String: Any])?["series"] as? [[String: Any]])
            let v2 = try #require(series.first { $0["service"] as? String == "svc" && $0["version"] as? String == "2" })
            #expect((v2["totals"] as? [String: Any])?["requests"] as? Int == 3)
            let problems = try #require(json["problems"] as? [[String: Any]])
            #expect(problems.first?["type"] as? String == "urn:portico:problem:api-key-required")
            #expect(problems.first?["service"] as? String == "svc")
            let keys = try #require(json["keys"] as? [[String: Any]])
            #expect(keys.map { $0["id"] as? String } == ["k1", "k2"])
            #expect(!state.bodyText.contains(PolicyReloadTests.secretOne) && !state.bodyText.contains(PolicyReloadTests.secretTwo))
        }
    }

    @Test("a page of another site cannot reload: an Origin needs the same origin and the page's token; the console's own POST works")
    func crossSite() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, _ in
            let page = try await offThePool { try gateway.adminRequest("GET", "/") }
            let token = try #require(Self.pageToken(page.bodyText))
            let own = "http://127.0.0.1:\(gateway.admin.port)"
            try gateway.write("keys.yaml", PolicyReloadTests.keysFile(k2: false, k1Status: "active"))
            let refused: [[(String, String)]] = [
                [("Origin", "https://attacker.example")],
                [("Origin", "https://attacker.example"), ("X-Portico-Console", token)],
                [("Origin", own)],
                [("Origin", own), ("X-Portico-Console", String(repeating: "0", count: 64))],
            ]
            for headers in refused {
                let answer = try await offThePool { try gateway.adminRequest("POST", "/admin/reload", headers: headers) }
                #expect(answer.status == 403, "\(headers)")
            }
            #expect(gateway.gateway.store.revision.generation == 0)
            // An image or script tag of another site's page sends no Origin, but its browser says whose it is.
            let embedded = try await offThePool {
                try gateway.adminRequest("GET", "/admin/console", headers: [("Sec-Fetch-Site", "cross-site")])
            }
            #expect(embedded.status == 403)
            let tool = try await offThePool { try gateway.adminRequest("GET", "/admin/policy") }
            #expect(tool.header("x-content-type-options") == "nosniff" && tool.header("cross-origin-resource-policy") == "same-origin")
            // The console's own request, and without a token only under a loopback name.
            let rebound = try await offThePool {
                try gateway.adminRequest(
                    "POST", "/admin/reload", headers: [("Origin", "http://attacker.example"), ("X-Portico-Console", token)],
                    host: "attacker.example")
            }
            #expect(rebound.status == 403)
            let reboundPage = try await offThePool { try gateway.adminRequest("GET", "/", host: "attacker.example") }
            #expect(reboundPage.status == 403)
            let applied = try await offThePool {
                try gateway.adminRequest("POST", "/admin/reload", headers: [("Origin", own), ("X-Portico-Console", token)])
            }
            #expect(applied.status == 200, "\(applied.bodyText)")
            #expect(gateway.gateway.store.revision.generation == 1)
        }
    }

    @Test("with an admin token, the page loads without it and its data needs it")
    func tokenNeeded() async throws {
        try await withReloadableGateway(
            backends: [namedBackend("alpha"), namedBackend("beta")],
            files: { ports in
                var files = Self.files(ports)
                files["gateway.yaml"] = """
                    \(TestGateway.gatewaySection(accessLog: false, tls: nil))
                    admin: { address: 127.0.0.1, port: 0, tokenFile: admin.token }
                    """
                files["admin.token"] = "console-admin-token-0123456789abcdef"
                return files
            }
        ) { gateway, _ in
            let page = try await offThePool { try gateway.adminRequest("GET", "/") }
            #expect(page.status == 200)
            let withoutToken = try await offThePool { try gateway.adminRequest("GET", "/admin/console") }
            #expect(withoutToken.status == 401)
            let answer = try await offThePool {
                try gateway.adminRequest("GET", "/admin/console", token: "console-admin-token-0123456789abcdef")
            }
            #expect(answer.status == 200)
            #expect(!answer.bodyText.contains("console-admin-token"))
        }
    }

    @Test(
        "in Chromium: services, versions and buckets appear, counters move with traffic, a check shows its diff, apply shows the new generation",
        .enabled(if: ConsoleBrowser.available, "chromium is not installed (scripts/install-deps.sh)"))
    func inTheBrowser() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, _ in
            let port = gateway.port
            let send: @Sendable (Int) throws -> Void = { count in
                for index in 0..<count {
                    _ = try RawHTTPClient(port: port).request(
                        "GET", "/svc/\(index)", headers: [("X-API-Key", Self.key), ("X-Client-Version", "2.1.0")])
                }
            }
            try await offThePool { try send(5) }
            let browser = try await offThePool { try ConsoleBrowser("http://127.0.0.1:\(gateway.admin.port)/") }
            defer { browser.close() }

            // What the policy says, drawn: services, versions, the buckets as ranges per platform.
            let drawn = try await offThePool { try browser.wait(for: "document.querySelector('[data-service=\"svc\"] svg.buckets')") }
            #expect(drawn, "the buckets were never drawn")
            let services = try await offThePool { try browser.text("#services-body") }
            #expect(
                services.contains("svc") && services.contains("other") && services.contains("proxy alpha")
                    && services.contains("proxy beta"))
            let axis = try await offThePool { try browser.text("#services-body svg.buckets text") }
            #expect(axis.contains("ipad"))
            #expect(services.contains(">=1.5.0 on ipad → v2"))
            let keys = try await offThePool { try browser.text("#keys-body") }
            #expect(keys.contains("k1"))
            let generation = try await offThePool { try browser.text("[data-fact=\"Generation\"]") }
            #expect(generation == "0")

            // Live counters: the page's total for svc v2 follows the traffic.
            let total =
                "(document.querySelector('#traffic-body [data-service=\"svc\"][data-version=\"2\"] [data-total]') || {}).textContent || ''"
            let before = try await offThePool { try browser.wait(for: "\(total).startsWith('5 ')") }
            #expect(before, "the first five requests never showed: \(String(describing: try? browser.evaluate(total)))")
            try await offThePool { try send(7) }
            let after = try await offThePool { try browser.wait(for: "\(total).startsWith('12 ')") }
            #expect(after, "the page did not follow: \(String(describing: try? browser.evaluate(total)))")

            // A changed policy: Check shows the diff and changes nothing; Apply installs it.
            try gateway.write("keys.yaml", PolicyReloadTests.keysFile(k2: false, k1Status: "active"))
            let checkClicked = try await offThePool { try browser.click("#check") }
            #expect(checkClicked)
            let diff = try await offThePool { try browser.wait(for: "document.querySelector('#reload-result table.diff')") }
            #expect(diff, "no diff was drawn: \(String(describing: try? browser.text("#reload-result")))")
            let checked = try await offThePool { try browser.text("#reload-result") }
            #expect(checked.contains("Check") && checked.contains("keys") && checked.contains("k2"), "\(checked)")
            #expect(gateway.gateway.store.revision.generation == 0)
            let applyClicked = try await offThePool { try browser.click("#apply") }
            #expect(applyClicked)
            let applied = try await offThePool {
                try browser.wait(for: "document.querySelector('[data-fact=\"Generation\"]').textContent === '1'")
            }
            #expect(applied, "the new generation never showed")
            #expect(gateway.gateway.store.revision.generation == 1)
            let result = try await offThePool { try browser.text("#reload-result") }
            #expect(result.contains("Applied: generation 1"))
            let keysShown = try await offThePool {
                try browser.wait(for: "!document.querySelector('#keys-body').textContent.includes('k2')")
            }
            #expect(keysShown, "the removed key is still listed")

            // A broken policy: Check lists its errors with file and key path; the active one stays.
            try gateway.write("backends.yaml", "backends:\n  alpha: { url: 12 }\n")
            let checkAgain = try await offThePool { try browser.click("#check") }
            #expect(checkAgain)
            let refused = try await offThePool {
                try browser.wait(for: "document.querySelector('#reload-result').dataset.outcome === 'refused'")
            }
            #expect(refused, "the refusal was never drawn")
            let errors = try await offThePool { try browser.text("#reload-result") }
            #expect(errors.contains("backends.yaml") && errors.contains("backends.alpha"), "\(errors)")
            #expect(gateway.gateway.store.revision.generation == 1)

            // A phone's width: one column, still every section.
            try await offThePool { try browser.viewport(width: 390, height: 844, mobile: true) }
            let oneColumn = try await offThePool {
                try browser.wait(
                    for: "getComputedStyle(document.querySelector('main')).gridTemplateColumns.trim().split(/\\s+/).length === 1")
            }
            #expect(oneColumn, "at 390 px the sections are not in one column")
            try await offThePool { try browser.viewport(width: 1280, height: 900, mobile: false) }
            // Light and dark follow the system; the text stays readable on either.
            let background = "getComputedStyle(document.documentElement).backgroundColor"
            let light = try await offThePool { try browser.evaluate(background) }
            try await offThePool { try browser.colorScheme("dark") }
            let dark = try await offThePool { try browser.wait(for: "\(background) !== '\(light)'") }
            #expect(dark, "the page looks the same in dark mode")
            try await offThePool { try browser.colorScheme("light") }
            // Keyboard: every control can take the focus, and the buttons act on Enter as on a click.
            let controls = "[...document.querySelectorAll('a, button, summary, input')].filter((e) => e.tabIndex < 0)"
            let unreachable = try await offThePool { try browser.evaluate("\(controls).map((e) => e.outerHTML).join(' ')") }
            #expect(unreachable == "", "not reachable from the keyboard: \(unreachable)")
            // Outside git (.build is ignored): what the page looked like, for whoever reads the run.
            let shot = InteropTests.repositoryRoot.appendingPathComponent(".build/console-screenshot.png").path
            let written = try await offThePool { try browser.screenshot(to: shot) }
            #expect(written > 10_000)
            // Nothing the page did broke its own policy or threw; the one failed load is the refused check's 422.
            let logged = try await offThePool { try browser.logged() }
            let expected = "Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)"
            #expect(
                !logged.contains {
                    $0["kind"] == "exception" || ($0["kind"] == "error" && $0["text"] != expected)
                        || ($0["text"] ?? "").contains("Content Security Policy")
                }, "\(logged)")
        }
    }

    @Test(
        "in Chromium, with an admin token: the page asks for it, keeps it out of the URL and storage, and then shows the gateway",
        .enabled(if: ConsoleBrowser.available, "chromium is not installed (scripts/install-deps.sh)"))
    func tokenInTheBrowser() async throws {
        let token = "console-admin-token-0123456789abcdef"
        try await withReloadableGateway(
            backends: [namedBackend("alpha"), namedBackend("beta")],
            files: { ports in
                var files = Self.files(ports)
                files["gateway.yaml"] = """
                    \(TestGateway.gatewaySection(accessLog: false, tls: nil))
                    admin: { address: 127.0.0.1, port: 0, tokenFile: admin.token }
                    """
                files["admin.token"] = token
                return files
            }
        ) { gateway, _ in
            let browser = try await offThePool { try ConsoleBrowser("http://127.0.0.1:\(gateway.admin.port)/") }
            defer { browser.close() }
            let asked = try await offThePool { try browser.wait(for: "!document.getElementById('auth').hidden") }
            #expect(asked, "the page never asked for the token")
            let facts = try await offThePool { try browser.text("#gateway-facts") }
            #expect(facts.isEmpty, "data shown without the token: \(facts)")
            _ = try await offThePool {
                try browser.evaluate(
                    "document.getElementById('token').value = '\(token)'; document.getElementById('auth').requestSubmit(); 'sent'")
            }
            let shown = try await offThePool { try browser.wait(for: "document.querySelector('[data-fact=\"Generation\"]')") }
            #expect(shown, "the gateway never showed after the token was given")
            let kept = try await offThePool {
                try browser.evaluate(
                    "[location.href, document.cookie, JSON.stringify(localStorage), JSON.stringify(sessionStorage), document.getElementById('token').value].join(' ')"
                )
            }
            #expect(!kept.contains(token), "the token is kept where it outlives the tab: \(kept)")
        }
    }

    @Test("a backend's requests in flight: one while the backend holds it, none once answered")
    func inFlight() async throws {
        let held = try await HeldBackend.start(body: "{}")
        let gateway = try await TestGateway.start(
            policy: """
                backends: { app: { url: "http://127.0.0.1:\(held.port)" } }
                services: { open: { path: /open, versions: { 1: { proxy: { backend: app } } } } }
                """)
        let port = gateway.port
        // The client waits as long as a loaded machine may need: if it gave up, its request would end.
        let call = Task { try await offThePool { try RawHTTPClient(port: port, receiveTimeout: 90).request("GET", "/open/x").status } }
        #expect(await eventually { held.requestsReceived == 1 })
        let during = await ConsoleState.read(gateway.gateway).backends.first { $0.name == "app" }
        #expect(during?.inFlight == 1)
        held.release()
        #expect(try await call.value == 200)
        let after = await ConsoleState.read(gateway.gateway).backends.first { $0.name == "app" }
        #expect(after?.inFlight == 0)
        await gateway.shutdown()
        try await held.shutdown()
    }

    @Test("a facade version's counts: answers by the source that served them, and how many a fallback served")
    func facadeCounts() async throws {
        let calls = Atomic<Int>(0)
        let primary = try await BackendServer.start { _ in
            calls.add(1, ordering: .relaxed).newValue == 1
                ? FacadeFallbackTests.json(.internalServerError, "{}") : FacadeFallbackTests.json(.ok, FacadeFallbackTests.answer)
        }
        let secondary = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        let gateway = try await TestGateway.start(policy: FacadeFallbackTests.policy(primary: primary.port, secondary: secondary.port))
        for _ in 0..<3 { #expect(try gateway.connect().request("GET", "/quote/AAPL").status == 200) }
        let state = await ConsoleState.read(gateway.gateway)
        let version = try #require(state.services.first { $0.name == "quote" }?.versions.first)
        #expect(version.facade == FacadeTallies.Counts(served: ["second": 1, "first": 2], fallbacksServed: 1, shadow: [:]))
        #expect(version.sources?.map(\.role) == ["active", "fallback"])
        await gateway.shutdown()
        try await primary.shutdown()
        try await secondary.shutdown()
    }

    static func pageToken(_ html: String) -> String? {
        guard let start = html.range(of: #"name="portico-console-token" content=""#) else { return nil }
        let rest = html[start.upperBound...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }
}

/// The traffic history's slots, driven by a clock of the test's.
@Suite("The console's traffic history")
struct TrafficHistoryTests {
    final class Clock: Sendable {
        let nanoseconds = Atomic<Int64>(1_000_000_000_000)
        func advance(seconds: Int64) { nanoseconds.add(seconds * 1_000_000_000, ordering: .relaxed) }
    }

    @Test("requests land in their 10-second slot, with status classes and quantiles; after 15 minutes they are gone")
    func slots() {
        let clock = Clock()
        let history = TrafficHistory(clock: { clock.nanoseconds.load(ordering: .relaxed) })
        let series = history.series(service: "svc", version: "1")
        #expect(history.series(service: "svc", version: "1") === series)
        #expect(history.snapshot().isEmpty, "a series without requests is not shown")
        for index in 0..<100 { history.record(series, status: index < 90 ? 200 : 503, nanoseconds: Int64(index + 1) * 1_000_000) }
        clock.advance(seconds: 10)
        history.record(series, status: 404, nanoseconds: 2_000_000)
        let view = try! #require(history.snapshot().first)
        #expect(view.requests.count == TrafficHistory.slotCount)
        #expect(Array(view.requests.suffix(2)) == [100, 1])
        #expect(Array(view.serverErrors.suffix(2)) == [10, 0] && Array(view.clientErrors.suffix(2)) == [0, 1])
        #expect(view.totals.requests == 101 && view.totals.statusClasses == ["1xx": 0, "2xx": 90, "3xx": 0, "4xx": 1, "5xx": 10])
        // 1 ms to 100 ms: the median is about 50 ms, the 99th about 99 ms, each within a bucket's fifth.
        let median = try! #require(view.p50Ms[TrafficHistory.slotCount - 2])
        let tail = try! #require(view.p99Ms[TrafficHistory.slotCount - 2])
        #expect(median >= 50 && median <= 50 * 1.2, "\(median)")
        #expect(tail >= 99 && tail <= 99 * 1.2, "\(tail)")
        #expect(view.p50Ms.first == .some(nil), "a slot without requests has no quantile")

        // The slot is reused 15 minutes later: its old counts do not come back.
        clock.advance(seconds: Int64(TrafficHistory.slotSeconds * (TrafficHistory.slotCount - 1)))
        history.record(series, status: 200, nanoseconds: 1_000)
        let later = try! #require(history.snapshot().first)
        #expect(later.totals.requests == 2 && later.requests.last == 1)
        clock.advance(seconds: Int64(TrafficHistory.slotSeconds * TrafficHistory.slotCount))
        #expect(history.snapshot().isEmpty)
    }

    @Test("durations fall in buckets a quarter of a doubling wide")
    func buckets() {
        for micros: Int64 in [1, 3, 10, 999, 1_000, 1_234_567, 10_000_000] {
            let bucket = TrafficHistory.Series.bucket(nanoseconds: micros * 1000)
            let upper = TrafficHistory.Series.upperBoundMilliseconds(bucket: bucket) * 1000
            #expect(Double(micros) < upper && upper <= Double(micros) * 2, "\(micros) µs → bucket \(bucket), up to \(upper) µs")
        }
    }
}
