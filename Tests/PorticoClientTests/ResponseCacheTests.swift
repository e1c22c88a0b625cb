import Foundation
import Testing

@testable import PorticoClient

/// The façade's GET cache on its own: what it keeps, for how long, and that it stays within its bounds.
@Suite("The façade's response cache")
struct ResponseCacheTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func answer(_ headers: [String: String], body: String = "{}", status: Int = 200) -> APIResponseData {
        APIResponseData(status: status, headers: headers, body: Data(body.utf8))
    }

    static func key(_ url: String, token: String? = nil) -> ResponseCache.Key {
        ResponseCache.Key(url: url, fields: token.map { ["authorization": $0] } ?? [:])
    }

    @Test("max-age less Age makes an answer fresh; no-cache and an ETag keep it for revalidation only; no-store keeps nothing")
    func freshness() {
        var cache = ResponseCache(entryLimit: 10, byteLimit: 10_000)
        cache.store(
            Self.key("a"), Self.answer(["cache-control": "public, max-age=60", "age": "20"]), now: Self.now, generation: cache.generation)
        #expect(cache.fresh(Self.key("a"), now: Self.now.addingTimeInterval(39)) != nil)
        #expect(cache.fresh(Self.key("a"), now: Self.now.addingTimeInterval(40)) == nil)

        cache.store(
            Self.key("b"), Self.answer(["cache-control": "no-cache", "etag": "\"b\""]), now: Self.now, generation: cache.generation)
        #expect(cache.fresh(Self.key("b"), now: Self.now) == nil)
        #expect(cache.validator(Self.key("b")) == "\"b\"")

        cache.store(
            Self.key("c"), Self.answer(["cache-control": "no-store, max-age=60", "etag": "\"c\""]), now: Self.now,
            generation: cache.generation)
        cache.store(Self.key("d"), Self.answer([:]), now: Self.now, generation: cache.generation)  // neither fresh nor revalidatable
        cache.store(Self.key("e"), Self.answer(["cache-control": "max-age=60", "vary": "*"]), now: Self.now, generation: cache.generation)
        cache.store(Self.key("f"), Self.answer(["cache-control": "max-age=60"], status: 404), now: Self.now, generation: cache.generation)
        #expect(cache.count == 2)
    }

    @Test("a 304 updates the stored fields and freshness, and the stored body answers")
    func revalidation() throws {
        var cache = ResponseCache(entryLimit: 10, byteLimit: 10_000)
        let key = Self.key("a")
        cache.store(
            key, Self.answer(["cache-control": "max-age=0", "etag": "\"1\""], body: #"{"v":1}"#), now: Self.now,
            generation: cache.generation)
        #expect(cache.fresh(key, now: Self.now) == nil)
        let notModified = Self.answer(["cache-control": "max-age=30", "etag": "\"1\""], body: "", status: 304)
        let revalidated = cache.revalidated(key, notModified: notModified, now: Self.now, generation: cache.generation)
        let stored = try #require(revalidated)
        #expect(stored.status == 200 && stored.body == Data(#"{"v":1}"#.utf8))
        #expect(cache.fresh(key, now: Self.now.addingTimeInterval(29))?.body == Data(#"{"v":1}"#.utf8))
        #expect(cache.revalidated(Self.key("gone"), notModified: notModified, now: Self.now, generation: cache.generation) == nil)
    }

    @Test(
        "the least recently used entry goes first, by count and by bytes; credentials are part of the key; an unsafe request drops the URL")
    func bounds() {
        var cache = ResponseCache(entryLimit: 2, byteLimit: 200)
        let fresh = ["cache-control": "max-age=60"]
        cache.store(Self.key("a"), Self.answer(fresh), now: Self.now, generation: cache.generation)
        cache.store(Self.key("b"), Self.answer(fresh), now: Self.now, generation: cache.generation)
        _ = cache.fresh(Self.key("a"), now: Self.now)  // a is now the more recent
        cache.store(Self.key("c"), Self.answer(fresh), now: Self.now, generation: cache.generation)
        #expect(cache.count == 2)
        #expect(cache.fresh(Self.key("b"), now: Self.now) == nil)
        #expect(cache.fresh(Self.key("a"), now: Self.now) != nil)

        cache.store(
            Self.key("big"), Self.answer(fresh, body: String(repeating: "x", count: 170)), now: Self.now, generation: cache.generation)
        #expect(cache.count == 1)  // 193 bytes with its fields: with a or c it would pass 200
        cache.store(
            Self.key("huge"), Self.answer(fresh, body: String(repeating: "x", count: 300)), now: Self.now, generation: cache.generation)
        #expect(cache.fresh(Self.key("huge"), now: Self.now) == nil)

        cache.store(Self.key("u", token: "one"), Self.answer(fresh, body: "1"), now: Self.now, generation: cache.generation)
        #expect(cache.fresh(Self.key("u", token: "two"), now: Self.now) == nil)
        #expect(cache.fresh(Self.key("u", token: "one"), now: Self.now)?.body == Data("1".utf8))
        // A POST, PUT or DELETE to the URL drops it for everyone.
        cache.invalidate(url: "u")
        #expect(cache.fresh(Self.key("u", token: "one"), now: Self.now) == nil)
    }

    @Test("an answer to a request that began before a clearing or a write to its URL is not stored")
    func generations() {
        var cache = ResponseCache(entryLimit: 10, byteLimit: 10_000)
        let fresh = ["cache-control": "max-age=60"]
        let before = cache.generation
        cache.clear()
        cache.store(Self.key("a"), Self.answer(fresh), now: Self.now, generation: before)
        #expect(cache.fresh(Self.key("a"), now: Self.now) == nil)
        let afterClear = cache.generation
        cache.invalidate(url: "b")
        cache.store(Self.key("b"), Self.answer(fresh), now: Self.now, generation: afterClear)
        #expect(cache.fresh(Self.key("b"), now: Self.now) == nil)
        cache.store(Self.key("b"), Self.answer(fresh), now: Self.now, generation: cache.generation)
        #expect(cache.fresh(Self.key("b"), now: Self.now) != nil)
        cache.clear()
        #expect(cache.count == 0)
        #expect(cache.fresh(Self.key("b"), now: Self.now) == nil)

        // A 304 to a request from before a clearing does not touch the answer stored since.
        let stale = ["cache-control": "max-age=0"]
        let old = cache.generation
        cache.store(Self.key("c"), Self.answer(stale.merging(["etag": "\"1\""]) { $1 }, body: "1"), now: Self.now, generation: old)
        cache.clear()
        cache.store(
            Self.key("c"), Self.answer(stale.merging(["etag": "\"2\""]) { $1 }, body: "2"), now: Self.now, generation: cache.generation)
        let notModified = Self.answer(["etag": "\"1\"", "cache-control": "max-age=60"])
        #expect(cache.revalidated(Self.key("c"), notModified: notModified, now: Self.now, generation: old) == nil)
        #expect(cache.validator(Self.key("c")) == "\"2\"")
        #expect(cache.fresh(Self.key("c"), now: Self.now) == nil)
    }

    @Test("query names and values are text: '+', '&', '=', '%' and non-ASCII reach the gateway as themselves")
    func queryEncoding() throws {
        let request = APIRequest(
            method: "GET", service: "s", path: "/x",
            query: [
                URLQueryItem(name: "q", value: "a+b c&d=e%f"), URLQueryItem(name: "é", value: "ü"), URLQueryItem(name: "flag", value: nil),
            ])
        let url = try request.url(base: URL(string: "https://gw.example/v1/s?k=1")!)
        #expect(url.absoluteString == "https://gw.example/v1/s/x?k=1&q=a%2Bb%20c%26d%3De%25f&%C3%A9=%C3%BC&flag")
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(items.map(\.value) == ["1", "a+b c&d=e%f", "ü", nil])
    }

    @Test("Retry-After as seconds or as an HTTP-date, taken against the answer's own Date; problem bodies only with their media type")
    func answerFields() {
        #expect(Self.answer(["retry-after": "3"]).retryAfter(now: Self.now) == .seconds(3))
        let dated = Self.answer(["retry-after": "Sun, 06 Nov 1994 08:49:40 GMT", "date": "Sun, 06 Nov 1994 08:49:37 GMT"])
        #expect(dated.retryAfter(now: Self.now) == .seconds(3))
        #expect(Self.answer(["retry-after": "soon"]).retryAfter(now: Self.now) == nil)
        #expect(Self.answer([:]).retryAfter(now: Self.now) == nil)

        let body =
            #"{"type":"urn:portico:problem:clock-skew","title":"Clock skew too large","status":401,"detail":"d","serverTime":"17","n":2}"#
        let problem = Self.answer(["content-type": "application/problem+json"], body: body).problem
        #expect(problem?.porticoType == "clock-skew")
        #expect(problem?.status == 401 && problem?.title == "Clock skew too large" && problem?.detail == "d")
        #expect(problem?.extensions == ["serverTime": "17", "n": "2"])
        #expect(Self.answer(["content-type": "application/json"], body: body).problem == nil)
    }
}
