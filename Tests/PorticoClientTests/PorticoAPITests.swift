import Foundation
import Logging
import Portico
import PorticoCrypto
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

@testable import PorticoClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `PorticoAPI`, the one-call façade, against the real gateway running the demo policy: the
/// locator resolves, the gateway verifies the signature and picks the version, the demo backends
/// answer. Requests are counted where they arrive (the backend, the gateway's access log).
@Suite("The client façade against the demo gateway")
struct PorticoAPITests {
    @Test("a typed GET: the active endpoint gives each app version its API version; an explicit version wins")
    func typedGet() async throws {
        try await FacadeFixture.run { _, locator, backends in
            let newApp = FacadeFixture.api(locator, appVersion: "2.4.1")
            let quote = try await newApp.get("stockQuote", path: "/AAPL", as: Quote.self)
            #expect(quote.symbol == "AAPL" && quote.name == "Apple Inc.")
            #expect(quote.percentageChange != nil)  // version 2's contract

            let oldApp = FacadeFixture.api(locator, appVersion: "1.4.0")
            let old = try await oldApp.get("stockQuote", path: "/MSFT", as: Quote.self)
            #expect(old.symbol == "MSFT" && old.percentageChange == nil)  // version 1's

            let pinnedToOne = try await newApp.get("stockQuote", version: "1", path: "/GOOG", as: Quote.self)
            #expect(pinnedToOne.symbol == "GOOG" && pinnedToOne.openingPrice == nil)
            #expect(backends[0].requestsReceived == 3)
        }
    }

    @Test("a signed POST with a JSON body: Content-Digest, the identity fields and the user token are sent and covered")
    func signedPost() async throws {
        struct Order: Encodable { var symbol: String, quantity: Int }
        try await FacadeFixture.run { _, locator, backends in
            let api = FacadeFixture.api(locator, credentials: BearerToken(token: "user-token-1"))
            let echoed = try await api.post("echo", path: "/orders", body: Order(symbol: "AAPL", quantity: 10), as: Echoed.self)
            #expect(echoed.method == "POST")
            #expect(echoed.path == "/orders")
            let sent = try #require(try JSONSerialization.jsonObject(with: Data(echoed.body.utf8)) as? [String: Any])
            #expect(sent["symbol"] as? String == "AAPL" && sent["quantity"] as? Int == 10)
            #expect(echoed.headers["content-type"] == "application/json")
            #expect(echoed.headers["content-digest"]?.hasPrefix("sha-256=:") == true)
            #expect(echoed.headers["authorization"] == "Bearer user-token-1")
            #expect(echoed.headers["x-client-version"] == "2.4.1" && echoed.headers["x-client-platform"] == "iphone")
            let covered = try #require(echoed.headers["signature-input"])
            for field in ["content-digest", "x-client-version", "x-client-platform", "content-type", "authorization"] {
                #expect(covered.contains("\"\(field)\""), "\(field) in \(covered)")
            }
            #expect(backends[1].requestsReceived == 1)
        }
    }

    @Test("426 for an app older than the minimum, with the gateway's message for the user")
    func upgradeRequired() async throws {
        try await FacadeFixture.run { _, locator, backends in
            let api = FacadeFixture.api(locator, appVersion: "0.9.0")
            let error = await #expect(throws: PorticoAPIError.upgradeRequired) {
                try await api.get("stockQuote", path: "/AAPL", as: Quote.self)
            }
            #expect(error?.status == 426)
            #expect(error?.problem?.type == "urn:portico:problem:upgrade-required")
            #expect(error?.problem?.title == "Update required")
            #expect(error?.problem?.detail?.contains("1.0.0") == true)
            #expect(error?.problem?.extensions["minimumClientVersion"] == "1.0.0")
            #expect(backends[0].requestsReceived == 0)
        }
    }

    @Test(
        "offline before any locator document was cached is .transport, with the URLError underneath, as when the gateway cannot be reached")
    func offlineFirstLaunch() async throws {
        let port = try RefusingPort.make()
        let api = FacadeFixture.api(URL(string: "http://127.0.0.1:\(port)/serviceLocator.json")!)
        let error = await #expect(throws: PorticoAPIError.transport) {
            try await api.get("stockQuote", path: "/AAPL", as: Quote.self)
        }
        #expect(error?.underlying is URLError, "\(String(describing: error?.underlying))")
        #expect(error != .locator)
        let locator = ServiceLocatorClient(url: URL(string: "http://127.0.0.1:\(port)/serviceLocator.json")!)
        let unreachable = await #expect(throws: ServiceLocatorError.unreachable) { try await locator.refresh() }
        #expect(unreachable?.underlying is URLError)
    }

    /// Answers every request with 418 and counts them: proof that a session's configuration was used.
    final class TeapotProtocol: URLProtocol, @unchecked Sendable {
        nonisolated(unsafe) static var seen: [String] = []
        static let lock = NSLock()

        override class func canInit(with request: URLRequest) -> Bool { true }
        override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
        override func startLoading() {
            Self.lock.withLock { Self.seen.append(request.url?.path ?? "") }
            let response = HTTPURLResponse(url: request.url!, statusCode: 418, httpVersion: "HTTP/1.1", headerFields: [:])!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: Data())
            client?.urlProtocolDidFinishLoading(self)
        }
        override func stopLoading() {}
    }

    @Test("the session an app gives also fetches the locator: one configuration for both")
    func sessionReachesLocator() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [TeapotProtocol.self]
        let session = URLSession(configuration: configuration)
        let api = PorticoAPI(
            locator: URL(string: "http://locator.test/serviceLocator.json")!, pinnedKey: FacadeFixture.pinned, keyID: "demo-app",
            secret: .value(FacadeFixture.demoSecret), identity: ClientIdentity(appVersion: "2.4.1", platform: "iphone"), session: session)
        let error = await #expect(throws: PorticoAPIError.locator) {
            try await api.get("stockQuote", path: "/AAPL", as: Quote.self)
        }
        #expect((error?.underlying as? ServiceLocatorError) == .httpStatus, "\(String(describing: error))")
        #expect(TeapotProtocol.lock.withLock { TeapotProtocol.seen }.contains("/serviceLocator.json"))
    }

    @Test("response(for:) carries the API version that served, the request id and the rate limit's state beside the value")
    func responseMetadata() async throws {
        try await FacadeFixture.run { _, locator, _ in
            let newApp = FacadeFixture.api(locator, appVersion: "2.4.1")
            let first = try await newApp.response(for: APIRequest(method: "GET", service: "stockQuote", path: "/AAPL"), as: Quote.self)
            #expect(first.value.symbol == "AAPL")
            #expect(first.status == 200)
            #expect(first.apiVersion == "2")
            #expect(first.requestID?.isEmpty == false)
            let limit = try #require(first.rateLimit, "\(first.headers)")
            // The demo tier (rate 50/s, burst 20) as the gateway states it: the burst within a second.
            #expect(limit.policy == "tier.standard")
            #expect(limit.quota == 20 && limit.window == .seconds(1), "\(first.headers)")
            let second = try await newApp.response(for: APIRequest(method: "GET", service: "stockQuote", path: "/MSFT"), as: Quote.self)
            #expect(second.rateLimit?.policy == limit.policy)
            // How many remain depends on how much time passed (the bucket refills): within the quota.
            #expect(second.rateLimit.map { (0...20).contains($0.remaining) } == true)
            #expect(second.requestID != first.requestID)
            let oldApp = FacadeFixture.api(locator, appVersion: "1.5.0")
            let old = try await oldApp.response(for: APIRequest(method: "GET", service: "stockQuote", path: "/GOOG"), as: Quote.self)
            #expect(old.apiVersion == "1")
        }
    }

    @Test("a revoked key's call is .forbidden with kind .keyRevoked, not .unauthorized or .problem")
    func forbiddenIsTyped() async throws {
        try await FacadeFixture.run { gateway, locator, backends in
            let api = FacadeFixture.api(locator)
            #expect(try await api.get("stockQuote", path: "/AAPL", as: Quote.self).symbol == "AAPL")
            let policy = FacadeFixture.policy(quotesPort: backends[0].port, echoPort: backends[1].port, gatewayPort: gateway.port)
            let revoked = policy.replacingOccurrences(of: "status: active", with: "status: revoked")
            #expect(revoked != policy)
            try gateway.reload(policy: revoked)
            let error = await #expect(throws: PorticoAPIError.forbidden) {
                try await api.get("stockQuote", path: "/MSFT", as: Quote.self)
            }
            #expect(error?.status == 403)
            #expect(error?.problem?.kind == .keyRevoked)
            #expect(error != .unauthorized && error != .problem)
        }
    }

    @Test("a pinned key that is not base64url, or not 32 bytes, is refused as malformed, not as a bad signature")
    func malformedPinnedKey() throws {
        for text in ["not a key!", "AAAA", LocatorSigning.base64URL(Array(repeating: 7, count: 31))] {
            let error = #expect(throws: ServiceLocatorError.invalidKey) { try PinnedLocatorKey(base64URL: text) }
            #expect(error != .invalidSignature)
            #expect(error?.description.contains("malformed") == true, "\(String(describing: error))")
        }
        _ = try PinnedLocatorKey(base64URL: LocatorSigning.base64URL(LocatorKeys.other.key.publicKey))
    }

    @Test("a problem+json refusal is decoded with its type, status, title and detail; a backend's own error is kept apart")
    func problemDecoded() async throws {
        try await FacadeFixture.run { _, locator, _ in
            let wrongSecret = FacadeFixture.api(locator, secret: String(FacadeFixture.demoSecret.reversed()))
            let error = await #expect(throws: PorticoAPIError.unauthorized) {
                try await wrongSecret.get("stockQuote", path: "/AAPL", as: Quote.self)
            }
            #expect(error?.status == 401)
            #expect(error?.problem?.type == "urn:portico:problem:signature-invalid")
            #expect(error?.problem?.porticoType == "signature-invalid")
            #expect(error?.problem?.kind == .signatureInvalid)
            #expect(error != .problem && error != .forbidden)
            #expect(error?.problem?.status == 401)
            #expect(error?.problem?.title == "Invalid signature")
            #expect(error?.problem?.detail?.isEmpty == false)
            #expect(error.map { !"\($0)".contains(FacadeFixture.demoSecret) } == true)

            // The demo backend's 404 is JSON but no problem: an HTTP status, not a problem.
            let api = FacadeFixture.api(locator)
            let notFound = await #expect(throws: PorticoAPIError.httpStatus) {
                try await api.get("stockQuote", path: "/NOPE", as: Quote.self)
            }
            #expect(notFound?.status == 404 && notFound?.problem == nil)
            // A 2xx that is not the type asked for.
            await #expect(throws: PorticoAPIError.decoding) { try await api.get("stockQuote", path: "/AAPL", as: [Quote].self) }
        }
    }

    @Test(
        "a device clock 10 minutes fast recovers with one retry, from the gateway's Date; 10 minutes slow, from the locator's signed time; a POST is re-synced but not sent again"
    )
    func clockSkew() async throws {
        let recorder = RecordingLogHandler()
        try await FacadeFixture.run(logger: Logger(label: "portico.test") { _ in recorder }) { _, locator, backends in
            let api = FacadeFixture.api(locator, clock: { Date().addingTimeInterval(600) })
            let quote = try await api.get("stockQuote", path: "/AMZN", as: Quote.self)
            #expect(quote.symbol == "AMZN")
            #expect(backends[0].requestsReceived == 1)
            let offset = api.gatewayClockOffset
            #expect(offset < -500 && offset > -700, "\(offset)")
            // At the gateway: one refusal, one success.
            #expect(
                await eventually { Self.statuses(recorder, path: "/api/stockquote/AMZN") == ["401", "200"] },
                "\(recorder.records.filter { $0.message == "access" }.map(\.metadata))")

            // Ten minutes slow: the locator's signature looks made in the future. Once verified, its
            // signed `created` is the gateway's time: the offset comes from it, and the call goes
            // through without a refusal.
            let slow = FacadeFixture.api(locator, clock: { Date().addingTimeInterval(-600) })
            #expect(try await slow.get("stockQuote", path: "/GOOG", as: Quote.self).symbol == "GOOG")
            #expect(slow.gatewayClockOffset > 500 && slow.gatewayClockOffset < 700, "\(slow.gatewayClockOffset)")
            #expect(await eventually { Self.statuses(recorder, path: "/api/stockquote/GOOG") == ["200"] })
            #expect(backends[0].requestsReceived == 2)

            // A POST with a wrong clock: refused, not sent again, and the offset is learnt for next time.
            let post = FacadeFixture.api(locator, clock: { Date().addingTimeInterval(600) })
            let refused = await #expect(throws: PorticoAPIError.unauthorized) {
                try await post.post("echo", path: "/once", body: ["a": 1], as: Echoed.self)
            }
            #expect(refused?.problem?.kind == .clockSkew)
            #expect(await eventually { Self.statuses(recorder, path: "/echo/once") == ["401"] })
            #expect(backends[1].requestsReceived == 0)
            _ = try await post.post("echo", path: "/twice", body: ["a": 2], as: Echoed.self)
            #expect(backends[1].requestsReceived == 1)
        }
    }

    static func statuses(_ recorder: RecordingLogHandler, path: String) -> [String] {
        recorder.records.filter { $0.message == "access" && $0.metadata["path"]?.description == path }
            .compactMap { $0.metadata["status"]?.description }
    }

    @Test("429 on a GET is retried once after its short Retry-After; on a POST it is thrown and never retried")
    func rateLimitRetry() async throws {
        let limiterClock = FacadeFixture.ManualLimiterClock()
        try await FacadeFixture.run(rateLimiter: limiterClock.limiter) { _, locator, backends in
            let waits = Mutex<[Duration]>([])
            // Waiting moves the gateway's rate-limit clock: no test waits for real.
            let api = FacadeFixture.api(
                locator,
                sleep: { delay in
                    waits.withLock { $0.append(delay) }
                    limiterClock.advance(by: delay)
                })
            // The demo tier gives this key a burst of 10 on stockQuote; query items keep the cache out.
            for index in 0..<10 {
                _ = try await api.get("stockQuote", path: "/AAPL", query: [URLQueryItem(name: "n", value: "\(index)")], as: Quote.self)
            }
            #expect(waits.withLock { $0 }.isEmpty)
            let retried = try await api.get("stockQuote", path: "/AAPL", query: [URLQueryItem(name: "n", value: "10")], as: Quote.self)
            #expect(retried.symbol == "AAPL")
            #expect(waits.withLock { $0 } == [.seconds(1)])
            #expect(backends[0].requestsReceived == 11)

            // echo's burst is 20: the 21st POST is refused, and not sent again.
            for index in 0..<20 { _ = try await api.post("echo", path: "/p\(index)", body: ["n": index], as: Echoed.self) }
            #expect(backends[1].requestsReceived == 20)
            let refused = await #expect(throws: PorticoAPIError.rateLimited) {
                try await api.post("echo", path: "/p20", body: ["n": 20], as: Echoed.self)
            }
            #expect(refused?.retryAfter == .seconds(1))
            #expect(refused?.problem?.type == "urn:portico:problem:rate-limited")
            #expect(backends[1].requestsReceived == 20)
            #expect(waits.withLock { $0.count } == 1)

            // A Retry-After above the configured cap is the app's to handle, even for a GET.
            var strict = PorticoAPI.Configuration()
            strict.maximumRetryDelay = .milliseconds(500)
            let impatient = FacadeFixture.api(locator, configuration: strict, sleep: { _ in Issue.record("must not wait") })
            for index in 0..<10 {
                _ = try? await impatient.get(
                    "stockQuote", path: "/MSFT", query: [URLQueryItem(name: "m", value: "\(index)")], as: Quote.self)
            }
            let limited = await #expect(throws: PorticoAPIError.rateLimited) {
                try await impatient.get("stockQuote", path: "/MSFT", query: [URLQueryItem(name: "m", value: "x")], as: Quote.self)
            }
            #expect(limited?.retryAfter == .seconds(1))
        }
    }

    @Test("503 from a backend at its concurrency cap is retried once for a GET, after Retry-After")
    func busyBackendRetry() async throws {
        let held = try await HeldBackend.start(body: #"{"symbol":"AAPL","name":"Apple Inc.","currentPrice":189.84}"#)
        defer { Task { try? await held.shutdown() } }
        try await FacadeFixture.run(quotesPort: held.port, quotesMaxConcurrent: 1) { _, locator, _ in
            let first = Mutex<Task<Quote, any Error>?>(nil)
            let waits = Mutex<[Duration]>([])
            // Waiting lets the held request finish, which frees the backend's one slot.
            let api = FacadeFixture.api(
                locator,
                sleep: { delay in
                    waits.withLock { $0.append(delay) }
                    held.release()
                    _ = try? await first.withLock { $0 }?.value
                })
            first.withLock { $0 = Task { try await api.get("stockQuote", path: "/AAPL", as: Quote.self) } }
            #expect(await eventually { held.requestsReceived == 1 })
            let second = try await api.get("stockQuote", path: "/MSFT", as: Quote.self)
            #expect(second.currentPrice == 189.84)
            #expect(waits.withLock { $0 } == [.seconds(1)])
            #expect(held.requestsReceived == 2)
        }
    }

    @Test("20 identical concurrent GETs reach the backend once; a cancelled caller does not cancel the others")
    func deduplication() async throws {
        let held = try await HeldBackend.start(body: #"{"symbol":"AAPL","name":"Apple Inc.","currentPrice":189.84}"#)
        defer { Task { try? await held.shutdown() } }
        try await FacadeFixture.run(quotesPort: held.port) { _, locator, _ in
            let api = FacadeFixture.api(locator)
            let callers = (0..<20).map { _ in Task { try await api.get("stockQuote", path: "/AAPL", as: Quote.self) } }
            let cancelled = Task { try await api.get("stockQuote", path: "/AAPL", as: Quote.self) }
            #expect(
                await eventually { held.requestsReceived == 1 && api.requestsWaiting == 21 },
                "backend requests \(held.requestsReceived), callers waiting \(api.requestsWaiting)")
            cancelled.cancel()
            await #expect(throws: PorticoAPIError.cancelled) { try await cancelled.value }
            #expect(api.requestsWaiting == 20)
            held.release()
            for caller in callers { #expect(try await caller.value.symbol == "AAPL") }
            #expect(held.requestsReceived == 1)
            // Another query is another request.
            _ = try await api.get("stockQuote", path: "/AAPL", query: [URLQueryItem(name: "x", value: "1")], as: Quote.self)
            #expect(held.requestsReceived == 2)
        }
    }

    @Test("a cached answer is served while fresh, then revalidated with If-None-Match and a 304")
    func cacheRevalidation() async throws {
        let quotes = FacadeFixture.ValidatingQuotes()
        let offset = Mutex<TimeInterval>(0)
        try await FacadeFixture.run(quotes: quotes.handler) { _, locator, backends in
            let api = FacadeFixture.api(locator, clock: { Date().addingTimeInterval(offset.withLock { $0 }) })
            let first = try await api.get("stockQuote", path: "/AAPL", as: Quote.self)
            #expect(backends[0].requestsReceived == 1)
            // Fresh (max-age=60): no request.
            #expect(try await api.get("stockQuote", path: "/AAPL", as: Quote.self) == first)
            #expect(backends[0].requestsReceived == 1)
            // Stale: revalidated, the backend answers 304, the stored answer serves.
            offset.withLock { $0 = 61 }
            #expect(try await api.get("stockQuote", path: "/AAPL", as: Quote.self) == first)
            #expect(backends[0].requestsReceived == 2)
            #expect(quotes.conditional.load(ordering: .relaxed) == 1)
            #expect(quotes.notModified.load(ordering: .relaxed) == 1)
            // The 304 made it fresh again.
            #expect(try await api.get("stockQuote", path: "/AAPL", as: Quote.self) == first)
            #expect(backends[0].requestsReceived == 2)
            // Another user's credentials get their own entry.
            let other = FacadeFixture.api(
                locator, credentials: BearerToken(token: "u2"), clock: { Date().addingTimeInterval(offset.withLock { $0 }) })
            _ = try await other.get("stockQuote", path: "/AAPL", as: Quote.self)
            #expect(backends[0].requestsReceived == 3)
        }
    }

    @Test("a locator whose signature fails is refused: nothing is sent to the service")
    func locatorSignatureRefused() async throws {
        try await FacadeFixture.run { _, locator, backends in
            let otherKey = try PinnedLocatorKey(base64URL: LocatorSigning.base64URL(LocatorKeys.other.key.publicKey))
            let api = FacadeFixture.api(locator, pinnedKey: otherKey)
            let error = await #expect(throws: PorticoAPIError.locator) { try await api.get("stockQuote", path: "/AAPL", as: Quote.self) }
            #expect((error?.underlying as? ServiceLocatorError) == .invalidSignature)
            #expect(backends[0].requestsReceived == 0)
            // An unknown service is a locator error too, not a transport one.
            let good = FacadeFixture.api(locator)
            await #expect(throws: PorticoAPIError.locator) { try await good.get("weather", path: "/x", as: Quote.self) }
        }
    }

    @Test("no answer at all is a transport failure, kept apart from the gateway's answers")
    func transportFailure() async throws {
        try await FacadeFixture.run { gateway, locator, backends in
            // The locator now publishes every endpoint on a port where nothing listens.
            let moved = FacadeFixture.policy(quotesPort: backends[0].port, echoPort: backends[1].port, gatewayPort: 1)
            gateway.gateway.store.replace(with: try TestGateway.snapshot(policy: moved))
            let api = FacadeFixture.api(locator)
            let error = await #expect(throws: PorticoAPIError.transport) { try await api.get("stockQuote", path: "/AAPL", as: Quote.self) }
            #expect(error?.status == nil && error?.problem == nil)
            #expect(error?.underlying is URLError)
            #expect(backends[0].requestsReceived == 0)
        }
    }

    struct Failing: Error, CustomStringConvertible {
        var description: String { "token-abc-123 expired" }
    }

    struct FailingCredentials: RequestCredentials {
        func fields(for request: APIRequest) async throws -> [String: String] { throw Failing() }
    }

    @Test("a failing credentials provider or secret source is a credentials error that does not repeat their words; nothing is sent")
    func credentialsFailures() async throws {
        try await FacadeFixture.run { _, locator, backends in
            let api = FacadeFixture.api(locator, credentials: FailingCredentials())
            let error = await #expect(throws: PorticoAPIError.credentials) {
                try await api.get("stockQuote", path: "/AAPL", as: Quote.self)
            }
            #expect(error?.underlying is Failing)
            #expect(error.map { !"\($0)".contains("token-abc-123") } == true)

            let noSecret = PorticoAPI(
                locator: locator, pinnedKey: FacadeFixture.pinned, keyID: "demo-app", secret: SecretSource { throw Failing() },
                identity: ClientIdentity(appVersion: "2.4.1"))
            let secretError = await #expect(throws: PorticoAPIError.credentials) {
                try await noSecret.post("echo", path: "/x", body: ["a": 1], as: Echoed.self)
            }
            #expect(secretError.map { !"\($0)".contains("token-abc-123") } == true)
            #expect(backends[0].requestsReceived == 0 && backends[1].requestsReceived == 0)
        }
    }
}
