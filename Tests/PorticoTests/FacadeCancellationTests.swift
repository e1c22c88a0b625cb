import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Synchronization
import Testing

/// A client that goes away ends its facade (or code handler): the fetches in flight are cancelled,
/// and nothing more is fetched for it. No test here measures time: each waits, within a generous
/// bound, for what the backends see, and checks what happened and in which order.
@Suite("Facade cancellation")
struct FacadeCancellationTests {
    static let hold: ScriptedBackend.Script = { _ in [] }
    static let fail500: [ScriptedBackend.Step] = [.text("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")]

    /// `first` on `primary` is active, `second` (the demo CSV feed on `secondary`) its fallback.
    /// The fallback's backend allows one fetch an hour: a fetch drawn for a request whose client
    /// left would leave none for the next request.
    static func policy(primary: Int, secondary: Int) -> String {
        FacadeFallbackTests.policy(primary: primary, secondary: secondary, primaryTimeout: "120s")
            .replacingOccurrences(of: "timeout: 5s }", with: "timeout: 5s, rateLimit: { rate: 1/h, burst: 1 } }")
    }

    @Test("a client that leaves while the active source is slow stops the facade: the fallback is never fetched")
    func noFallbackAfterTheClientLeft() async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "portico.test") { _ in recorder }
        // The first request is held (the slow active source); later ones are answered 500.
        let seen = Atomic<Int>(0)
        let primary = try await ScriptedBackend.start { _ in
            seen.add(1, ordering: .relaxed).newValue == 1 ? [] : Self.fail500
        }
        let secondary = try await BackendServer.start(handler: DemoBackends.quotesCSV)
        let gateway = try await TestGateway.start(policy: Self.policy(primary: primary.port, secondary: secondary.port), logger: logger)

        let leaving = try gateway.connect()
        try leaving.send("GET /quote/AAPL HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(try await primary.waitUntil { $0.requestsReceived == 1 })
        leaving.hangUp()
        // The cancelled fetch closes its connection; whatever the facade did next, it did on the
        // same event loop turn, before this close was written.
        #expect(try await primary.waitUntil { $0.connectionsClosed == 1 })
        #expect(secondary.requestsReceived == 0)

        // The next request falls back as usual: the fallback's one fetch was not spent on the
        // request whose client left.
        let response = try gateway.connect().request("GET", "/quote/AAPL")
        #expect(response.status == 200, "\(response.bodyText)")
        #expect(response.bodyText == FacadeFallbackTests.answer)
        #expect(primary.requestsReceived == 2)
        #expect(secondary.requestsReceived == 1)
        await gateway.shutdown()
        try await primary.shutdown()
        try await secondary.shutdown()

        // The cancellation was no source's failure: only the second request's active source failed.
        let failed = recorder.records.filter { $0.message == "facade source failed" }
        #expect(failed.map { $0.metadata["source"]?.description } == ["first"])
        #expect(failed.map { $0.metadata["reason"]?.description } == ["answered 500"])
        let access = recorder.records.filter { $0.message == "access" }
        #expect(access.map { $0.metadata["status"]?.description } == ["499", "200"])
    }

    @Test("a client that leaves cancels every part of an aggregation in flight")
    func aggregationPartsCancelled() async throws {
        let places = try await ScriptedBackend.start(script: Self.hold)
        let readings = try await ScriptedBackend.start(script: Self.hold)
        let policy = FacadeAggregationTests.policy(places: places.port, temperatures: readings.port)
            .replacingOccurrences(of: "\" }\n", with: "\", timeout: 120s }\n")
        let gateway = try await TestGateway.start(policy: policy)
        let client = try gateway.connect()
        try client.send("GET /weather/Austin HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(try await places.waitUntil { $0.requestsReceived == 1 })
        #expect(try await readings.waitUntil { $0.requestsReceived == 1 })
        client.hangUp()
        #expect(try await places.waitUntil { $0.connectionsClosed == 1 })
        #expect(try await readings.waitUntil { $0.connectionsClosed == 1 })
        await gateway.shutdown()
        try await places.shutdown()
        try await readings.shutdown()
    }

    @Test("a client that leaves before its answer cancels the shadow's fetch too, which is not counted as failed")
    func shadowCancelledWithTheRest() async throws {
        let primary = try await ScriptedBackend.start(script: Self.hold)
        let candidate = try await ScriptedBackend.start(script: Self.hold)
        let policy = FacadeShadowTests.policy(primary: primary.port, candidate: candidate.port, candidateTimeout: "120s", limited: false)
            .replacingOccurrences(of: "\(primary.port)\" }", with: "\(primary.port)\", timeout: 120s }")
        let gateway = try await TestGateway.start(policy: policy)
        let client = try gateway.connect()
        try client.send("GET /quote/AAPL HTTP/1.1\r\nHost: test\r\n\r\n")
        #expect(try await primary.waitUntil { $0.requestsReceived == 1 })
        #expect(try await candidate.waitUntil { $0.requestsReceived == 1 })
        client.hangUp()
        #expect(try await primary.waitUntil { $0.connectionsClosed == 1 })
        #expect(try await candidate.waitUntil { $0.connectionsClosed == 1 })
        #expect(FacadeShadowTests.count("shadow_failed", in: gateway) == 0)
        await gateway.shutdown()
        try await primary.shutdown()
        try await candidate.shutdown()
    }
}
