import Foundation
import NIOCore
import NIOHTTP1
import PorticoClient
import PorticoDemoBackends
import Synchronization
import Testing

/// A locator document server the test steers: what it serves, with which ETag and Cache-Control,
/// or a failure; it answers `If-None-Match` with 304 and records what it was asked.
final class LocatorServer: Sendable {
    struct State {
        var document = ""
        var etag = "\"v1\""
        var cacheControl: String? = "max-age=60"
        var age: String?
        var failWith: HTTPResponseStatus?
        var requests: [String?] = []  // the If-None-Match of each request
    }

    let state = Mutex(State())

    func set(_ body: (inout State) -> Void) { state.withLock { body(&$0) } }
    var requests: [String?] { state.withLock { $0.requests } }

    @Sendable func handle(_ request: BackendRequest) -> BackendResponse {
        state.withLock { state in
            let ifNoneMatch = request.headers.first(name: "if-none-match")
            state.requests.append(ifNoneMatch)
            if let failure = state.failWith {
                return .full(status: failure, headers: HTTPHeaders(), body: ByteBuffer(string: "unavailable"))
            }
            var headers = HTTPHeaders([("ETag", state.etag), ("Content-Type", "application/json")])
            if let cacheControl = state.cacheControl { headers.add(name: "Cache-Control", value: cacheControl) }
            if let age = state.age { headers.add(name: "Age", value: age) }
            if ifNoneMatch == state.etag { return .full(status: .notModified, headers: headers, body: ByteBuffer()) }
            return .full(status: .ok, headers: headers, body: ByteBuffer(string: state.document))
        }
    }
}

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let now = Mutex(Date(timeIntervalSince1970: 1_763_800_000))
    func read() -> Date { now.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
}

func locatorDocument(_ entries: [(String, String, String)]) -> String {
    let services = entries.map { name, version, url in
        #"{"name": "\#(name)", "version": \#(Int(version).map(String.init) ?? "\"\(version)\""), "url": "\#(url)", "metadata": {"auth": "signature", "beta": false}}"#
    }
    return #"{"generated": "2026-11-22T18:00:00Z", "services": [\#(services.joined(separator: ", "))]}"#
}

@Suite("ServiceLocatorClient against a served locator document")
struct ServiceLocatorClientTests {
    /// Runs `body` with a locator server on loopback and a client (real URLSession) pointed at it.
    func withLocator(
        _ configure: (inout LocatorServer.State) -> Void,
        _ body: (LocatorServer, BackendServer, ServiceLocatorClient, ManualClock) async throws -> Void
    ) async throws {
        let server = LocatorServer()
        server.set(configure)
        let backend = try await BackendServer.start(handler: server.handle)
        let clock = ManualClock()
        let client = ServiceLocatorClient(
            url: URL(string: "http://127.0.0.1:\(backend.port)/serviceLocator.json")!, clock: { clock.read() })
        do {
            try await body(server, backend, client, clock)
        } catch {
            try? await backend.shutdown()
            throw error
        }
        try? await backend.shutdown()
    }

    @Test("resolves from the cache while fresh, then revalidates with If-None-Match and gets a 304")
    func cachesAndRevalidates() async throws {
        try await withLocator({ $0.document = locatorDocument([("stockQuote", "1", "https://api.example.com/api/1/stockquote")]) }) {
            server, _, client, clock in
            #expect(try await client.url(for: "stockQuote", version: "1").absoluteString == "https://api.example.com/api/1/stockquote")
            let endpoint = try await client.endpoint(service: "stockQuote", version: "1")
            #expect(endpoint.metadata == ["auth": "signature", "beta": "false"])
            #expect(server.requests == [nil])

            clock.advance(61)
            #expect(try await client.url(for: "stockQuote", version: "1").absoluteString == "https://api.example.com/api/1/stockquote")
            #expect(server.requests == [nil, "\"v1\""])
            // The 304 renewed freshness: no request within the next max-age.
            clock.advance(30)
            _ = try await client.url(for: "stockQuote", version: "1")
            #expect(server.requests.count == 2)
        }
    }

    @Test("a changed document replaces the cached one on refresh; Age shortens freshness")
    func picksUpChanges() async throws {
        try await withLocator({
            $0.document = locatorDocument([("stockQuote", "1", "https://old.example.com/api/1/stockquote")])
            $0.age = "50"
        }) { server, _, client, clock in
            _ = try await client.url(for: "stockQuote", version: "1")
            server.set {
                $0.document = locatorDocument([("stockQuote", "1", "https://new.example.com/api/1/stockquote")])
                $0.etag = "\"v2\""
                $0.age = nil
            }
            clock.advance(11)  // max-age 60 less Age 50: already stale
            #expect(try await client.url(for: "stockQuote", version: "1").host == "new.example.com")
            #expect(server.requests == [nil, "\"v1\""])
        }
    }

    @Test("a Cache-Control with a bare \"=\" directive is read, not a crash; its max-age still counts")
    func oddCacheControl() async throws {
        try await withLocator({
            $0.document = locatorDocument([("stockQuote", "1", "https://api.example.com/api/1/stockquote")])
            $0.cacheControl = "max-age=60,=, ="
        }) { server, _, client, clock in
            _ = try await client.url(for: "stockQuote", version: "1")
            clock.advance(30)
            _ = try await client.url(for: "stockQuote", version: "1")
            #expect(server.requests == [nil])
            clock.advance(31)
            _ = try await client.url(for: "stockQuote", version: "1")
            #expect(server.requests == [nil, "\"v1\""])
        }
    }

    @Test("a failed refresh keeps the last good document, and does not retry on every call")
    func keepsLastGoodDocument() async throws {
        try await withLocator({ $0.document = locatorDocument([("weather", "2", "https://api.example.com/api/2/weather")]) }) {
            server, _, client, clock in
            _ = try await client.url(for: "weather", version: "2")

            for failure in [(HTTPResponseStatus.serviceUnavailable, ServiceLocatorError.httpStatus), (.ok, .invalidDocument)] {
                server.set {
                    $0.failWith = failure.0 == .ok ? nil : failure.0
                    $0.document = "{\"services\": [{\"name\": \"weather\"}]}"
                    $0.etag = "\"broken\""
                }
                let error = await #expect(throws: ServiceLocatorError.self) { try await client.refresh() }
                #expect(error == failure.1)
                #expect(try await client.url(for: "weather", version: "2").path == "/api/2/weather")
            }
            let broken = await #expect(throws: ServiceLocatorError.self) { try await client.refresh() }
            #expect(broken?.description.contains("services[0]: missing \"version\"") == true, "\(String(describing: broken))")

            // Stale and failing: the stale copy answers, and the next try waits for the interval.
            clock.advance(61)
            let before = server.requests.count
            #expect(try await client.url(for: "weather", version: "2").path == "/api/2/weather")
            #expect(try await client.url(for: "weather", version: "2").path == "/api/2/weather")
            #expect(server.requests.count == before + 1)
            #expect(await client.document?.services.count == 1)
        }
    }

    @Test("an endpoint missing from the document triggers one refresh, then unknownEndpoint")
    func refreshesOnDemand() async throws {
        try await withLocator({ $0.document = locatorDocument([("stockQuote", "1", "https://api.example.com/api/1/stockquote")]) }) {
            server, _, client, clock in
            _ = try await client.url(for: "stockQuote", version: "1")
            server.set {
                $0.document = locatorDocument([
                    ("stockQuote", "1", "https://api.example.com/api/1/stockquote"),
                    ("stockQuote", "2", "https://api.example.com/api/2/stockquote"),
                ])
                $0.etag = "\"v2\""
            }
            clock.advance(31)  // past the minimum refresh interval, still fresh
            #expect(try await client.url(for: "stockQuote", version: "2").path == "/api/2/stockquote")
            #expect(server.requests.count == 2)

            clock.advance(31)
            await #expect(throws: ServiceLocatorError.unknownEndpoint) { try await client.url(for: "stockQuote", version: "3") }
            await #expect(throws: ServiceLocatorError.unknownEndpoint) { try await client.url(for: "stockQuote", version: "3") }
            #expect(server.requests.count == 3)
        }
    }

    @Test("no document and an unreachable locator: unreachable, and concurrent callers share one fetch")
    func unreachableAndCoalesced() async throws {
        let nobody = ServiceLocatorClient(url: URL(string: "http://127.0.0.1:9/serviceLocator.json")!)
        await #expect(throws: ServiceLocatorError.unreachable) { try await nobody.url(for: "stockQuote", version: "1") }

        try await withLocator({ $0.document = locatorDocument([("stockQuote", "1", "https://api.example.com/api/1/stockquote")]) }) {
            server, _, client, _ in
            try await withThrowingTaskGroup(of: URL.self) { group in
                for _ in 0..<20 { group.addTask { try await client.url(for: "stockQuote", version: "1") } }
                for try await url in group { #expect(url.path == "/api/1/stockquote") }
            }
            #expect(server.requests.count == 1)
        }
    }
}
