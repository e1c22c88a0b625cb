import NIOCore
import NIOEmbedded
import NIOHTTP1
import PorticoHTTP
import Testing

@testable import Portico

@Suite("What the cache reads: HTTP dates, Cache-Control, CDN-Cache-Control, Age")
struct CacheParsingTests {
    @Test("the three date forms read to the same moment; anything else reads as none")
    func dates() {
        let moment: Int64 = 784_111_777  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == moment)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == moment)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == moment)
        #expect(HTTPDate.parse(" Sun, 06 Nov 1994 08:49:37 GMT ") == moment)
        #expect(HTTPDate.format(moment) == "Sun, 06 Nov 1994 08:49:37 GMT")
        for invalid in [
            "0", "", "Sun, 06 Nov 1994 08:49:37 UTC", "Thu, 18  Aug  2050 02:01:18 GMT", "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 06-Nov-1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:49:37 GMT", "2050-08-18T02:01:18Z",
        ] {
            #expect(HTTPDate.parse(invalid) == nil, "\(invalid)")
        }
    }

    @Test("Cache-Control: the first of a repeated directive wins, quoted values count, invalid max-age is stale, huge is 2^31")
    func cacheControl() {
        let control = CacheControl(lines: [#"max-age="30", no-cache="Set-Cookie, X""#, "max-age=5, PRIVATE, s-maxage=-1"])
        #expect(control.maxAge == 30)
        #expect(control.noCache)
        #expect(control.isPrivate)
        #expect(control.sMaxAge == 0)
        #expect(CacheControl(lines: ["max-age=3.5"]).maxAge == 0)
        #expect(CacheControl(lines: ["max-age=99999999999999999999"]).maxAge == CacheControl.maxDeltaSeconds)
        #expect(CacheControl(lines: ["max-age=003600"]).maxAge == 3600)
        #expect(CacheControl(lines: ["max-stale"]).maxStale == Int.max)
        #expect(CacheControl(lines: ["max-stale=10, min-fresh=5, only-if-cached"]).minFresh == 5)
        #expect(CacheControl(lines: ["stale-while-revalidate=60, stale-if-error=600"]).staleIfError == 600)
        #expect(CacheControl(lines: ["nothing-to-see-here"]) == CacheControl())
    }

    @Test("CDN-Cache-Control, when a valid Structured Field dictionary, replaces Cache-Control and Expires")
    func targeted() {
        let headers = HTTPHeaders([("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=600, stale-if-error=60")])
        let directives = ResponseDirectives(headers)
        #expect(directives.targeted)
        #expect(directives.control.maxAge == 600)
        #expect(!directives.control.noStore)
        #expect(directives.control.staleIfError == 60)
        let invalid = ResponseDirectives(HTTPHeaders([("Cache-Control", "max-age=5"), ("CDN-Cache-Control", "max-age=1, {")]))
        #expect(!invalid.targeted)
        #expect(invalid.control.maxAge == 5)
    }

    static func entry(
        _ target: String, body: Int = 100, headers: [(String, String)] = [("Cache-Control", "max-age=60")], now: Double = 1000,
        request: HTTPHeaders = HTTPHeaders()
    ) -> CachedResponse {
        CachedResponse(
            key: CacheKey(service: "s", target: target), version: 1, status: 200, headers: HTTPHeaders(headers),
            body: ByteBuffer(repeating: 0x61, count: body), contentLength: body, requestTime: now, responseTime: now, rules: nil,
            freshness: 60, request: request)
    }

    static func request(_ target: String, headers: HTTPHeaders = HTTPHeaders()) -> CacheRequest {
        CacheRequest(key: CacheKey(service: "s", target: target), version: 1, headers: headers, authenticated: false, isHEAD: false)
    }

    @Test("Age: the first value of the first line; Date before the response makes it older")
    func age() {
        #expect(Self.entry("/a", headers: [("Age", "7200, 0")]).age(at: 1000) == 7200)
        #expect(Self.entry("/a", headers: [("Age", "abc")]).age(at: 1010) == 10)
        #expect(Self.entry("/a", headers: [("Date", HTTPDate.format(900))]).age(at: 1000) == 100)
    }

    @Test("the store never holds more bytes than its bound, and eviction spares entries hit since the hand passed (SIEVE)")
    func sieve() throws {
        let cache = ResponseCache(clock: { 1000 })
        let loop = EmbeddedEventLoop()
        let size = Self.entry("/0").size
        let bound = size * 4
        for index in 0..<4 {
            let entry = Self.entry("/\(index)")
            cache.replace(entry, selectedBy: HTTPHeaders(), maxBytes: bound)
        }
        #expect(cache.usage.entries == 4)
        // /0 and /2 are hit; the next two stores evict /1 and /3, the unvisited ones.
        for target in ["/0", "/2"] {
            guard case .hit = cache.lookup(Self.request(target), on: loop, maxWaiters: 10, waitTimeout: .seconds(1)) else {
                Issue.record("expected a hit for \(target)")
                return
            }
        }
        cache.replace(Self.entry("/4"), selectedBy: HTTPHeaders(), maxBytes: bound)
        cache.replace(Self.entry("/5"), selectedBy: HTTPHeaders(), maxBytes: bound)
        #expect(cache.usage.bytes <= bound)
        #expect(cache.stored(Self.request("/0")) != nil)
        #expect(cache.stored(Self.request("/2")) != nil)
        #expect(cache.stored(Self.request("/1")) == nil)
        #expect(cache.stored(Self.request("/3")) == nil)
        // An entry larger than the whole bound is not stored.
        cache.replace(Self.entry("/big", body: bound), selectedBy: HTTPHeaders(), maxBytes: bound)
        #expect(cache.stored(Self.request("/big")) == nil)
        #expect(cache.usage.bytes <= bound)
        #expect(cache.purge(.all) == 4)
        #expect(cache.usage == (0, 0))
    }

    @Test("a waiter is told to go to the backend when its wait times out, and looks again when the fill stores")
    func waiters() throws {
        let cache = ResponseCache(clock: { 1000 })
        let loop = EmbeddedEventLoop()
        guard case .fetch(let fill, nil) = cache.lookup(Self.request("/w"), on: loop, maxWaiters: 1, waitTimeout: .seconds(5)) else {
            Issue.record("the first lookup fetches")
            return
        }
        guard case .wait(let first) = cache.lookup(Self.request("/w"), on: loop, maxWaiters: 1, waitTimeout: .seconds(5)) else {
            Issue.record("the second waits")
            return
        }
        // Over maxWaiters: goes on its own at once.
        guard case .pass = cache.lookup(Self.request("/w"), on: loop, maxWaiters: 1, waitTimeout: .seconds(5)) else {
            Issue.record("the third passes")
            return
        }
        var ends: [ResponseCache.FillEnd] = []
        first.whenSuccess { ends.append($0) }
        loop.advanceTime(by: .seconds(5))
        #expect(ends.count == 1)
        if case .goToBackend = ends.first {} else { Issue.record("a timed-out waiter goes to the backend") }
        guard case .wait(let second) = cache.lookup(Self.request("/w"), on: loop, maxWaiters: 1, waitTimeout: .seconds(5)) else {
            Issue.record("a new waiter waits")
            return
        }
        second.whenSuccess { ends.append($0) }
        fill.store(Self.entry("/w"), selectedBy: HTTPHeaders(), maxBytes: 1 << 20)
        loop.run()
        if case .lookAgain = ends.last {} else { Issue.record("a stored fill sends its waiters to look again") }
        guard case .hit = cache.lookup(Self.request("/w"), on: loop, maxWaiters: 1, waitTimeout: .seconds(5)) else {
            Issue.record("then it is a hit")
            return
        }
        #expect(cache.waiting == 0)
    }

    @Test("a fill dropped without being ended (its exchange went away) sends its waiters to look again")
    func droppedFill() {
        let cache = ResponseCache(clock: { 1000 })
        let loop = EmbeddedEventLoop()
        var lookup: ResponseCache.Lookup? = cache.lookup(Self.request("/d"), on: loop, maxWaiters: 5, waitTimeout: .seconds(60))
        guard case .fetch = lookup else {
            Issue.record("the first lookup fetches")
            return
        }
        guard case .wait(let waiting) = cache.lookup(Self.request("/d"), on: loop, maxWaiters: 5, waitTimeout: .seconds(60)) else {
            Issue.record("the second waits")
            return
        }
        var end: ResponseCache.FillEnd?
        waiting.whenSuccess { end = $0 }
        lookup = nil
        loop.run()
        if case .lookAgain = end {} else { Issue.record("expected lookAgain, got \(String(describing: end))") }
        _ = lookup
    }
}
