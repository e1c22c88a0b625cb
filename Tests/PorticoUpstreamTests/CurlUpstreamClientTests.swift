import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PorticoDemoBackends
import PorticoTestSupport
import Testing

@testable import PorticoUpstream

@Suite("The libcurl upstream client")
struct CurlUpstreamClientTests {
    let group = MultiThreadedEventLoopGroup.singleton

    func run(_ client: CurlUpstreamClient, _ request: UpstreamRequest) async throws -> Outcome {
        try await exchange(client, request, on: group.next())
    }

    @Test("a request and its response cross the curl thread intact")
    func roundTrip() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let client = CurlUpstreamClient()
        defer { client.shutdown() }
        let request = UpstreamRequest(
            method: "PATCH", url: "http://127.0.0.1:\(server.port)/p/q?r=s",
            headers: [("X-One", "1"), ("X-Empty", ""), ("Content-Type", "text/plain")], body: ByteBuffer(string: "payload"))
        let collector = try await run(client, request)
        let head = try #require(collector.head)
        #expect(head.status == 200)
        #expect(head.headers.contains { $0.name.lowercased() == "content-type" && $0.value == "application/json" })
        let text = String(buffer: collector.body)
        #expect(text.contains("\"method\":\"PATCH\""))
        #expect(text.contains("\"body\":\"payload\""))
        #expect(text.contains("\"x-one\":\"1\""))
        // An empty value is sent (libcurl's `name;`), not left out.
        #expect(text.contains("\"x-empty\":\"\""), "\(text)")
        #expect(text.contains("\"query\":\"r=s\""))
        #expect(!text.contains("\"accept\""))
        #expect(!text.contains("\"expect\""))
        if case .success = collector.result {} else { Issue.record("expected success, got \(String(describing: collector.result))") }
        try await server.shutdown()
    }

    @Test("1,000 concurrent requests complete over far fewer backend connections")
    func thousandConcurrent() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let client = CurlUpstreamClient(configuration: .init(threads: 2, maxConnectionsPerHost: 32))
        defer { client.shutdown() }
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<1000 {
                group.addTask {
                    let request = UpstreamRequest(
                        method: "GET", url: "http://127.0.0.1:\(server.port)/item/\(index)", timeout: .seconds(30))
                    let collector = try await run(client, request)
                    return collector.head?.status ?? -1
                }
            }
            var statuses: [Int] = []
            for try await status in group { statuses.append(status) }
            return statuses
        }
        #expect(statuses.count == 1000)
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(server.requestsReceived == 1000)
        // Two curl threads with at most 32 connections each.
        #expect(server.connectionsAccepted <= 64)
        try await server.shutdown()
    }

    @Test("a consumer that stops taking bytes pauses the download instead of buffering it")
    func backPressure() async throws {
        let size = 8 * 1024 * 1024
        let server = try await BackendServer.start { _ in .stream(status: .ok, headers: HTTPHeaders(), totalBytes: size) }
        let client = CurlUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let bound = try await loop.submit {
            let collector = Collector(eventLoop: loop)
            collector.keepBody = false
            collector.consumesImmediately = false
            collector.task = client.execute(
                // Only the credit decides when this download ends: no timeout a slow machine could reach.
                UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/big", timeout: .seconds(600)), eventLoop: loop,
                handler: collector)
            return NIOLoopBound(collector, eventLoop: loop)
        }.get()
        try await Task.sleep(for: .milliseconds(500))
        let stalled = try await loop.submit { bound.value.bodyBytes }.get()
        // Credit is 256 KiB; one more 64 KiB read may land before the pause is seen.
        #expect(stalled > 0)
        #expect(stalled <= 256 * 1024 + 64 * 1024)
        // Return the credit steadily until the end.
        while try await loop.submit({ bound.value.result == nil }).get() {
            try await loop.submit {
                let collector = bound.value
                let amount = collector.unconsumed
                collector.unconsumed = 0
                collector.consumesImmediately = true
                if amount > 0 { collector.task?.consumed(bytes: amount) }
            }.get()
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try await loop.submit { bound.value.bodyBytes }.get() == size)
        try await server.shutdown()
    }

    @Test("refused connections and timeouts are told apart")
    func failures() async throws {
        let hanging = try await BackendServer.start { _ in .hang }
        let closedPort = try RefusingPort.make()
        let client = CurlUpstreamClient()
        defer { client.shutdown() }

        let refused = try await run(client, UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(closedPort)/"))
        guard case .failure(let refusedError) = refused.result else { Issue.record("expected failure"); return }
        #expect(refusedError.kind == .connectFailed)

        let timedOut = try await run(
            client, UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(hanging.port)/", timeout: .milliseconds(200)))
        guard case .failure(let timeoutError) = timedOut.result else { Issue.record("expected failure"); return }
        #expect(timeoutError.kind == .timedOut)
        try await hanging.shutdown()
    }

    @Test("cancelling an exchange hangs up on the backend and delivers nothing more")
    func cancel() async throws {
        // Reads the request and never answers: only a cancel can end the exchange before its timeout.
        let server = try await ScriptedBackend.start { _ in [] }
        let client = CurlUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let bound = try await loop.submit {
            let collector = Collector(eventLoop: loop)
            collector.task = client.execute(
                UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/", timeout: .seconds(120)), eventLoop: loop,
                handler: collector)
            return NIOLoopBound(collector, eventLoop: loop)
        }.get()
        try #require(try await server.waitUntil { $0.requestsReceived == 1 }, "the request never reached the backend")
        #expect(server.connectionsClosed == 0)

        try await loop.submit { bound.value.task?.cancel() }.get()
        // The backend sees the connection close: the cancel reached libcurl, which dropped it (the
        // timeout is far beyond the wait's bound, so nothing else could have closed it).
        #expect(try await server.waitUntil { $0.connectionsClosed == 1 }, "the backend connection stayed open after cancel()")
        // Anything the curl thread shipped before it hung up was queued on the loop before this.
        #expect(try await loop.submit { bound.value.deliveries }.get() == 0)
        try await loop.submit { bound.value.done.succeed() }.get()
        try await server.shutdown()
    }

    @Test("shutting down answers every exchange in flight or submitted later with a shutdown error")
    func shutdownAnswersEveryone() async throws {
        let server = try await BackendServer.start { _ in .hang }
        let client = CurlUpstreamClient(configuration: .init(threads: 2))
        let request = UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/", timeout: .seconds(30))
        let kinds = try await withThrowingTaskGroup(of: UpstreamError.Kind?.self) { group in
            for index in 0..<200 {
                group.addTask {
                    if index == 100 { client.shutdown() }  // some exchanges start before, some after
                    let outcome = try await run(client, request)
                    guard case .failure(let error) = outcome.result else { return nil }
                    return error.kind
                }
            }
            var kinds: [UpstreamError.Kind?] = []
            for try await kind in group { kinds.append(kind) }
            return kinds
        }
        #expect(kinds.count == 200)
        #expect(kinds.allSatisfy { $0 == .shutdown })
        try await server.shutdown()
    }

    @Test("flow control resumes only below the low watermark and never loses a resume")
    func flowControl() {
        let flow = FlowControl(highWatermark: 100, lowWatermark: 40)
        #expect(flow.reserve(60))
        #expect(flow.reserve(60))  // 120 outstanding: over the mark, but the chunk was taken
        #expect(!flow.reserve(10))  // now paused
        #expect(!flow.release(50))  // 70: still above the low watermark
        #expect(flow.release(30))  // 40: resume
        #expect(!flow.release(40))  // not paused any more: nothing to resume
        #expect(flow.outstanding == 0)
    }
}
