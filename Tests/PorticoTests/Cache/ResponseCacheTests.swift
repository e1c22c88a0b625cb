import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

@testable import Portico

@Suite("The response cache through the real gateway (RFC 9111)")
struct ResponseCacheTests {
    static func policy(_ ports: [Int], cache: String = "{ defaultTTL: 30s }", extra: String = "") -> String {
        """
        backends:
          origin: { url: "http://127.0.0.1:\(ports[0])", timeout: 5s }
        services:
          weather:
            path: /weather
            cache: \(cache)
            versions:
              1: { proxy: { backend: origin } }
          live:
            path: /live
            versions:
              1: { proxy: { backend: origin } }
        \(extra)
        """
    }

    /// Starts an origin and a gateway in front of it on a clock the test moves.
    func withCache(
        cache: String = "{ defaultTTL: 30s }", extra: String = "", logger: Logger? = nil,
        _ body: (TestGateway, CacheOrigin, ManualWallClock) async throws -> Void
    ) async throws {
        let origin = CacheOrigin()
        let clock = ManualWallClock()
        try await withGateway(
            backends: [origin.handler], logger: logger, cacheClock: clock.function, policy: { Self.policy($0, cache: cache, extra: extra) }
        ) { gateway, _ in
            try await body(gateway, origin, clock)
        }
    }

    @Test("a fresh response is stored and served again without the backend, with Age and Cache-Status")
    func freshHit() async throws {
        try await withCache { gateway, origin, clock in
            origin.answer("/weather/paris", headers: [("Cache-Control", "max-age=60")], body: #"{"t":12}"#)
            let client = try gateway.connect()
            let first = try client.request("GET", "/weather/paris")
            #expect(first.status == 200)
            #expect(first.header("Cache-Status") == "Portico; fwd=miss; fwd-status=200; stored")
            clock.advance(by: 10)
            let second = try client.request("GET", "/weather/paris")
            #expect(second.status == 200)
            #expect(second.bodyText == #"{"t":12}"#)
            #expect(second.header("Cache-Status") == "Portico; hit")
            #expect(second.header("Age") == "10")
            #expect(second.header("X-Request-Id") != first.header("X-Request-Id"))
            #expect(origin.count("/weather/paris") == 1)
            // HEAD is answered from the GET's entry, with its length and no body.
            let head = try client.request("HEAD", "/weather/paris")
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == "8")
            #expect(head.body.isEmpty)
            #expect(origin.count("/weather/paris") == 1)
            // A service without `cache` sends every request on.
            origin.answer("/live/paris", headers: [("Cache-Control", "max-age=60")], body: "{}")
            _ = try client.request("GET", "/live/paris")
            let live = try client.request("GET", "/live/paris")
            #expect(live.header("Cache-Status") == nil)
            #expect(origin.count("/live/paris") == 2)
        }
    }

    @Test("a stale response is revalidated with its ETag; the backend's 304 refreshes it and the client gets the whole body")
    func revalidation() async throws {
        try await withCache { gateway, origin, clock in
            origin.answer(
                "/weather/oslo", headers: [("Cache-Control", "max-age=5"), ("ETag", #""v1""#), ("X-Origin", "first")], body: "[1]")
            let client = try gateway.connect()
            _ = try client.request("GET", "/weather/oslo")
            clock.advance(by: 6)
            origin.answer(
                "/weather/oslo", headers: [("Cache-Control", "max-age=100"), ("ETag", #""v1""#), ("X-Origin", "second")], body: "[1]")
            let revalidated = try client.request("GET", "/weather/oslo", headers: [("If-None-Match", #""other""#)])
            #expect(revalidated.status == 200)
            #expect(revalidated.bodyText == "[1]")
            #expect(revalidated.header("Cache-Status") == "Portico; fwd=stale; fwd-status=304; stored")
            #expect(revalidated.header("X-Origin") == "second")
            let sent = origin.requests("/weather/oslo")
            #expect(sent.count == 2)
            // The cache's own validator went, not the client's.
            #expect(sent.last?.headers["if-none-match"] == [#""v1""#])
            // The 304's freshness (max-age=100) now applies.
            clock.advance(by: 50)
            let hit = try client.request("GET", "/weather/oslo")
            #expect(hit.header("Cache-Status") == "Portico; hit")
            #expect(origin.count("/weather/oslo") == 2)
        }
    }

    @Test("the client's own If-None-Match on a stored response is answered 304 by the cache")
    func conditionalHit() async throws {
        try await withCache { gateway, origin, _ in
            origin.answer("/weather/rome", headers: [("Cache-Control", "max-age=60"), ("ETag", #"W/"r7""#)], body: "{}")
            let client = try gateway.connect()
            _ = try client.request("GET", "/weather/rome")
            let notModified = try client.request("GET", "/weather/rome", headers: [("If-None-Match", #""a", "r7""#)])
            #expect(notModified.status == 304)
            #expect(notModified.header("ETag") == #"W/"r7""#)
            #expect(notModified.body.isEmpty)
            #expect(origin.count("/weather/rome") == 1)
            // A miss sends the backend no validator of the client's: it wants the whole response.
            origin.answer("/weather/nice", headers: [("Cache-Control", "max-age=60"), ("ETag", #""n""#)], body: "{}")
            let miss = try client.request("GET", "/weather/nice", headers: [("If-None-Match", #""n""#)])
            #expect(miss.status == 200)
            #expect(origin.requests("/weather/nice").first?.headers["if-none-match"] == [])
        }
    }

    @Test("no-store, private, Set-Cookie and Vary: * are not stored; a request's no-cache goes to the backend")
    func notStored() async throws {
        try await withCache { gateway, origin, _ in
            let client = try gateway.connect()
            let cases: [(String, [(String, String)])] = [
                ("/weather/a", [("Cache-Control", "no-store, max-age=60")]),
                ("/weather/b", [("Cache-Control", "private, max-age=60")]),
                ("/weather/c", [("Cache-Control", "max-age=60"), ("Set-Cookie", "session=1")]),
                ("/weather/d", [("Cache-Control", "max-age=60"), ("Vary", "*")]),
            ]
            for (path, headers) in cases {
                origin.answer(path, headers: headers, body: "{}")
                let first = try client.request("GET", path)
                #expect(first.header("Cache-Status") == "Portico; fwd=miss; fwd-status=200", "\(path)")
                _ = try client.request("GET", path)
                #expect(origin.count(path) == 2, "\(path)")
            }
            origin.answer("/weather/e", headers: [("Cache-Control", "max-age=60")], body: "{}")
            _ = try client.request("GET", "/weather/e")
            let forced = try client.request("GET", "/weather/e", headers: [("Cache-Control", "no-cache")])
            #expect(forced.header("Cache-Status")?.hasPrefix("Portico; fwd=stale") == true)
            let pragma = try client.request("GET", "/weather/e", headers: [("Pragma", "no-cache")])
            #expect(pragma.header("Cache-Status")?.hasPrefix("Portico; fwd=stale") == true)
            #expect(origin.count("/weather/e") == 3)
        }
    }

    @Test("defaultTTL applies only to a response without freshness of its own that may be stored heuristically")
    func defaultTTL() async throws {
        try await withCache(cache: "{ defaultTTL: 20s }") { gateway, origin, clock in
            let client = try gateway.connect()
            origin.answer("/weather/plain", body: "{}")
            origin.answer("/weather/created", status: 201, body: "{}")
            origin.answer("/weather/expired", headers: [("Expires", "0")], body: "{}")
            for path in ["/weather/plain", "/weather/created", "/weather/expired"] {
                _ = try client.request("GET", path)
                _ = try client.request("GET", path)
            }
            #expect(origin.count("/weather/plain") == 1)
            #expect(origin.count("/weather/created") == 2)
            #expect(origin.count("/weather/expired") == 2)
            clock.advance(by: 21)
            _ = try client.request("GET", "/weather/plain")
            #expect(origin.count("/weather/plain") == 2)
        }
    }

    @Test("Vary selects a stored variant by the request's fields")
    func vary() async throws {
        try await withCache { gateway, origin, _ in
            origin.answer("/weather/lang", headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")], body: "{}")
            let client = try gateway.connect()
            _ = try client.request("GET", "/weather/lang", headers: [("Accept-Language", "fr")])
            _ = try client.request("GET", "/weather/lang", headers: [("Accept-Language", "de")])
            let french = try client.request("GET", "/weather/lang", headers: [("Accept-Language", "fr")])
            let german = try client.request("GET", "/weather/lang", headers: [("Accept-Language", "de")])
            let none = try client.request("GET", "/weather/lang")
            #expect(french.header("Cache-Status") == "Portico; hit")
            #expect(german.header("Cache-Status") == "Portico; hit")
            #expect(none.header("Cache-Status")?.hasPrefix("Portico; fwd=miss") == true)
            #expect(origin.count("/weather/lang") == 3)
        }
    }

    @Test("an unsafe request that succeeds drops the target's entries, and the one its Location names")
    func invalidation() async throws {
        try await withCache { gateway, origin, _ in
            origin.answer("/weather/x", headers: [("Cache-Control", "max-age=60")], body: "{}")
            origin.answer("/weather/y", headers: [("Cache-Control", "max-age=60")], body: "{}")
            let client = try gateway.connect()
            for path in ["/weather/x", "/weather/y", "/weather/x", "/weather/y"] { _ = try client.request("GET", path) }
            #expect(origin.count() == 2)
            // A failed POST changes nothing.
            origin.answer("/weather/x", status: 500, headers: [("Cache-Control", "max-age=60")], body: "{}")
            _ = try client.request("POST", "/weather/x", body: "{}")
            origin.answer("/weather/x", headers: [("Cache-Control", "max-age=60")], body: "{}")
            #expect(try client.request("GET", "/weather/x").header("Cache-Status") == "Portico; hit")
            origin.answer("/weather/x", status: 200, headers: [("Cache-Control", "max-age=60"), ("Location", "/weather/y")], body: "{}")
            let post = try client.request("POST", "/weather/x", body: "{}")
            #expect(post.status == 200)
            origin.answer("/weather/x", headers: [("Cache-Control", "max-age=60")], body: "{}")
            #expect(try client.request("GET", "/weather/x").header("Cache-Status")?.hasPrefix("Portico; fwd=miss") == true)
            #expect(try client.request("GET", "/weather/y").header("Cache-Status")?.hasPrefix("Portico; fwd=miss") == true)
        }
    }

    @Test("an authenticated request reuses a stored response only when it is public, or the service is the same for every key")
    func authenticated() async throws {
        try await withCache { gateway, origin, _ in
            let client = try gateway.connect()
            origin.answer("/weather/private", headers: [("Cache-Control", "max-age=60")], body: "{}")
            origin.answer("/weather/public", headers: [("Cache-Control", "public, max-age=60")], body: "{}")
            for path in ["/weather/private", "/weather/public"] {
                _ = try client.request("GET", path, headers: [("Authorization", "Bearer a")])
                _ = try client.request("GET", path, headers: [("Authorization", "Bearer b")])
            }
            #expect(origin.count("/weather/private") == 2)
            #expect(origin.count("/weather/public") == 1)
        }
        try await withCache(cache: "{ sameForEveryKey: true }") { gateway, origin, _ in
            let client = try gateway.connect()
            origin.answer("/weather/private", headers: [("Cache-Control", "max-age=60")], body: "{}")
            _ = try client.request("GET", "/weather/private", headers: [("Authorization", "Bearer a")])
            _ = try client.request("GET", "/weather/private", headers: [("Authorization", "Bearer b")])
            #expect(origin.count("/weather/private") == 1)
        }
    }

    @Test("stale-if-error: a dead or failing backend gets the stale response instead of a 502")
    func staleIfError() async throws {
        try await withCache { gateway, origin, clock in
            origin.answer("/weather/berlin", headers: [("Cache-Control", "max-age=1, stale-if-error=60")], body: "[7]")
            origin.answer("/weather/bonn", headers: [("Cache-Control", "max-age=1")], body: "[8]")
            let client = try gateway.connect()
            _ = try client.request("GET", "/weather/berlin")
            _ = try client.request("GET", "/weather/bonn")
            clock.advance(by: 10)
            origin.answer("/weather/berlin", status: 503, body: "{}")
            origin.answer("/weather/bonn", status: 503, body: "{}")
            let stale = try client.request("GET", "/weather/berlin")
            #expect(stale.status == 200)
            #expect(stale.bodyText == "[7]")
            #expect(stale.header("Cache-Status") == "Portico; fwd=stale; fwd-status=503; detail=stale-if-error")
            #expect(stale.header("Age") == "10")
            // Without stale-if-error the failure is the answer.
            #expect(try client.request("GET", "/weather/bonn").status == 503)
            // Past the window, too.
            clock.advance(by: 60)
            #expect(try client.request("GET", "/weather/berlin").status == 503)
        }
    }

    @Test("stale-if-error from the policy covers a backend that drops the connection without answering")
    func staleIfErrorBrokenBackend() async throws {
        try await withCache(cache: "{ staleIfError: 5m }") { gateway, origin, clock in
            origin.answer("/weather/lyon", headers: [("Cache-Control", "max-age=5")], body: "[3]")
            let client = try gateway.connect()
            #expect(try client.request("GET", "/weather/lyon").status == 200)
            origin.crash("/weather/lyon")
            origin.crash("/weather/unknown")
            clock.advance(by: 30)
            let stale = try client.request("GET", "/weather/lyon")
            #expect(stale.status == 200)
            #expect(stale.bodyText == "[3]")
            #expect(stale.header("Cache-Status") == "Portico; fwd=stale; detail=stale-if-error")
            #expect(try client.request("GET", "/weather/unknown").status == 502)
            #expect(origin.count("/weather/lyon") >= 2)
        }
    }

    @Test("stale-while-revalidate: the stale response is served at once and one background request refreshes it")
    func staleWhileRevalidate() async throws {
        try await withCache { gateway, origin, clock in
            origin.answer("/weather/madrid", headers: [("Cache-Control", "max-age=5, stale-while-revalidate=60")], body: "[1]")
            let client = try gateway.connect()
            _ = try client.request("GET", "/weather/madrid")
            clock.advance(by: 10)
            origin.answer("/weather/madrid", headers: [("Cache-Control", "max-age=5, stale-while-revalidate=60")], body: "[2]")
            let stale = try client.request("GET", "/weather/madrid")
            #expect(stale.bodyText == "[1]")
            #expect(stale.header("Cache-Status") == "Portico; hit; detail=stale-while-revalidate")
            #expect(await eventually { origin.count("/weather/madrid") == 2 })
            #expect(await eventually { (try? gateway.connect().request("GET", "/weather/madrid").bodyText) == "[2]" })
            #expect(origin.count("/weather/madrid") == 2)
        }
    }

    /// A policy in which nothing gives up on its own before the test releases the backend (the
    /// backend's timeout, a waiter's): on a loaded machine the test may take a while to get there.
    static func patientPolicy(_ port: Int) -> String {
        policy([port], extra: "cache: { waitTimeout: 10m }").replacingOccurrences(of: "timeout: 5s", with: "timeout: 10m")
    }

    /// `count` connections that have each sent `GET target` and not read anything yet: all in
    /// flight at once without a thread each (a blocked thread pool would serialise them).
    static func sendAll(_ count: Int, _ target: String, to gateway: TestGateway) throws -> [RawHTTPClient] {
        try (0..<count).map { _ in
            let client = try gateway.connect(receiveTimeout: 30)
            try client.send("GET \(target) HTTP/1.1\r\nHost: gateway.test\r\n\r\n")
            return client
        }
    }

    @Test("concurrent misses for one key make one backend request; the others are answered from it")
    func coalescing() async throws {
        let held = try await HeldBackend.start(body: #"{"held":true}"#, headers: [("Cache-Control", "max-age=60")])
        let gateway = try await TestGateway.start(policy: Self.patientPolicy(held.port))
        let count = 50
        let clients = try Self.sendAll(count, "/weather/same", to: gateway)
        #expect(await eventually { held.requestsReceived == 1 && gateway.gateway.cache.waiting == count - 1 })
        held.release()
        let answers = try await offThePool { try clients.map { try $0.readResponse() } }
        #expect(held.requestsReceived == 1)
        #expect(answers.allSatisfy { $0.status == 200 && $0.bodyText == #"{"held":true}"# })
        #expect(answers.filter { $0.header("Cache-Status") == "Portico; hit; collapsed" }.count == count - 1)
        await gateway.shutdown()
        try await held.shutdown()
    }

    @Test("waiters whose response turns out not storable each go to the backend")
    func coalescingUnstorable() async throws {
        let held = try await HeldBackend.start(body: "{}", headers: [("Cache-Control", "private")])
        let gateway = try await TestGateway.start(policy: Self.patientPolicy(held.port))
        let clients = try Self.sendAll(5, "/weather/mine", to: gateway)
        #expect(await eventually { held.requestsReceived == 1 && gateway.gateway.cache.waiting == 4 })
        held.release()
        let statuses = try await offThePool { try clients.map { try $0.readResponse().status } }
        #expect(statuses == [200, 200, 200, 200, 200])
        #expect(held.requestsReceived == 5)
        await gateway.shutdown()
        try await held.shutdown()
    }

    @Test("a hit does not draw from the backend's rate limit; a miss does")
    func hitsSpareTheBackendLimit() async throws {
        let origin = CacheOrigin()
        try await withGateway(
            backends: [origin.handler],
            policy: { ports in
                Self.policy(ports).replacingOccurrences(
                    of: "timeout: 5s }", with: "timeout: 5s, rateLimit: { rate: 1/h, burst: 1 } }")
            }
        ) { gateway, _ in
            origin.answer("/weather/q", headers: [("Cache-Control", "max-age=3600")], body: "{}")
            let client = try gateway.connect()
            #expect(try client.request("GET", "/weather/q").status == 200)
            for _ in 0..<5 { #expect(try client.request("GET", "/weather/q").status == 200) }
            let refused = try client.request("GET", "/weather/other")
            #expect(refused.status == 429)
            #expect(origin.count() == 1)
        }
    }

    @Test("a response larger than maxObjectBytes is passed on whole and not stored; the bound on bytes holds")
    func bounds() async throws {
        try await withCache(extra: "cache: { maxBytes: 8KiB, maxObjectBytes: 2KiB }") { gateway, origin, _ in
            let big = String(repeating: "x", count: 3000)
            origin.answer("/weather/big", headers: [("Cache-Control", "max-age=60")], body: big)
            let client = try gateway.connect()
            #expect(try client.request("GET", "/weather/big").bodyText == big)
            #expect(try client.request("GET", "/weather/big").bodyText == big)
            #expect(origin.count("/weather/big") == 2)
            for index in 0..<20 {
                origin.answer("/weather/s\(index)", headers: [("Cache-Control", "max-age=60")], body: String(repeating: "y", count: 1000))
                _ = try client.request("GET", "/weather/s\(index)")
                #expect(gateway.gateway.cache.usage.bytes <= 8 * 1024)
            }
            #expect(gateway.gateway.cache.usage.entries > 0)
        }
    }

    @Test("purge by target, service and surrogate key through the admin API; metrics count hits and misses")
    func purgeAndMetrics() async throws {
        try await withCache { gateway, origin, _ in
            origin.answer("/weather/p1", headers: [("Cache-Control", "max-age=60"), ("Surrogate-Key", "city europe")], body: "{}")
            origin.answer("/weather/p2", headers: [("Cache-Control", "max-age=60"), ("Cache-Tag", "asia")], body: "{}")
            let client = try gateway.connect()
            func status(_ path: String) throws -> String? { try client.request("GET", path).header("Cache-Status") }
            _ = try status("/weather/p1")
            _ = try status("/weather/p2")
            let admin = AdminAPI(gateway: gateway.gateway, reloader: nil, boundAddress: "127.0.0.1")
            let byTag = await admin.respond(method: .POST, uri: "/admin/cache/purge?tag=europe", authorization: nil)
            #expect(byTag.status == .ok)
            #expect(String(decoding: byTag.body, as: UTF8.self).contains(#""purged" : 1"#))
            #expect(try status("/weather/p1")?.hasPrefix("Portico; fwd=miss") == true)
            #expect(try status("/weather/p2") == "Portico; hit")
            let byTarget = await admin.respond(method: .POST, uri: "/admin/cache/purge?target=/weather/p2", authorization: nil)
            #expect(String(decoding: byTarget.body, as: UTF8.self).contains(#""purged" : 1"#))
            #expect(try status("/weather/p2")?.hasPrefix("Portico; fwd=miss") == true)
            let byService = await admin.respond(method: .POST, uri: "/admin/cache/purge?service=weather", authorization: nil)
            #expect(String(decoding: byService.body, as: UTF8.self).contains(#""purged" : 2"#))
            #expect(gateway.gateway.cache.usage.entries == 0)
            let bad = await admin.respond(method: .POST, uri: "/admin/cache/purge?service=weather&tag=x", authorization: nil)
            #expect(bad.status == .badRequest)
            let wrongMethod = await admin.respond(method: .GET, uri: "/admin/cache/purge?all=true", authorization: nil)
            #expect(wrongMethod.status == .methodNotAllowed)
            let metrics = gateway.gateway.metrics.render()
            #expect(metrics.contains(#"portico_cache_requests_total{result="hit"} 1"#))
            #expect(metrics.contains(#"portico_cache_requests_total{result="miss"} 4"#))
            #expect(metrics.contains("portico_cache_entries 0"))
        }
    }
}

@Suite("Facade source fetches in flight are merged")
struct SourceFetchCoalescingTests {
    static func policy(_ port: Int) -> String {
        var services = ""
        for name in ["a", "b"] {
            services += """
                  \(name):
                    path: /\(name)
                    versions:
                      1:
                        facade:
                          parameters: /{city}
                          contract: { t: number }
                          sources:
                            main: { backend: feed, request: "/feed/{city}", format: json, fields: { t: /t } }
                          active: main

                """
        }
        return """
            backends:
              feed: { url: "http://127.0.0.1:\(port)", timeout: 10m }
            services:
            \(services)
            """
    }

    @Test("two services' facades fetching the same source target at once make one backend request")
    func merged() async throws {
        let held = try await HeldBackend.start(body: #"{"t": 21}"#)
        let gateway = try await TestGateway.start(policy: Self.policy(held.port))
        let clients = try ["a", "b"].map { service in
            let client = try gateway.connect(receiveTimeout: 30)
            try client.send("GET /\(service)/oslo HTTP/1.1\r\nHost: gateway.test\r\n\r\n")
            return client
        }
        #expect(await eventually { held.requestsReceived == 1 && gateway.gateway.sourceFetches.waiting == 1 })
        held.release()
        let bodies = try await offThePool { try clients.map { try $0.readResponse().bodyText } }
        #expect(bodies == [#"{"t":21}"#, #"{"t":21}"#])
        #expect(held.requestsReceived == 1)
        // Once done, the next fetch goes to the backend again.
        _ = try gateway.connect().request("GET", "/a/oslo")
        #expect(held.requestsReceived == 2)
        #expect(gateway.gateway.sourceFetches.count == 0)
        await gateway.shutdown()
        try await held.shutdown()
    }
}

@Suite("Methods as the client spelled them")
struct MethodSpellingTests {
    @Test("M-SEARCH reaches the backend as M-SEARCH (NIO's own name for it is MSEARCH), and invalidates like any unsafe method")
    func mSearch() async throws {
        let methods = Mutex<[String]>([])
        let backend = try await ScriptedBackend.start { request in
            methods.withLock { $0.append(request.method) }
            return [.text("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: max-age=60\r\n\r\n{}")]
        }
        let gateway = try await TestGateway.start(policy: ResponseCacheTests.policy([backend.port]))
        let client = try gateway.connect()
        #expect(try client.request("GET", "/weather/ssdp").status == 200)
        #expect(try client.request("GET", "/weather/ssdp").header("Cache-Status") == "Portico; hit")
        #expect(try client.request("M-SEARCH", "/weather/ssdp").status == 200)
        #expect(try client.request("GET", "/weather/ssdp").header("Cache-Status")?.hasPrefix("Portico; fwd=miss") == true)
        #expect(methods.withLock { $0 } == ["GET", "M-SEARCH", "GET"])
        await gateway.shutdown()
    }
}
