import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PorticoDemoBackends
import Testing

@testable import PorticoUpstream

/// Collects one exchange's events; lives on its event loop.
final class Collector: UpstreamResponseHandler {
    var head: UpstreamResponseHead?
    var bodyBytes = 0
    var body = ByteBuffer()
    var keepBody = true
    var result: Result<UpstreamMetrics, UpstreamError>?
    var deliveries = 0
    let done: EventLoopPromise<Void>
    /// Whether to return credit for delivered bytes at once (a fast client) or hold it (a stalled one).
    var consumesImmediately = true
    var task: (any UpstreamTask)?
    var unconsumed = 0

    init(eventLoop: any EventLoop) { done = eventLoop.makePromise() }

    func upstreamReceived(_ events: UpstreamEvents) {
        deliveries += 1
        if let head = events.head { self.head = head }
        if var part = events.body {
            bodyBytes += part.readableBytes
            if keepBody { body.writeBuffer(&part) }
            if events.result == nil {
                let count = events.body?.readableBytes ?? 0
                if consumesImmediately { task?.consumed(bytes: count) } else { unconsumed += count }
            }
        }
        if let result = events.result {
            self.result = result
            done.succeed()
        }
    }
}

@Suite("The libcurl upstream client")
struct CurlUpstreamClientTests {
    let group = MultiThreadedEventLoopGroup.singleton

    /// What a finished exchange delivered, copied off its event loop.
    struct Outcome: Sendable {
        var head: UpstreamResponseHead?
        var body: ByteBuffer
        var result: Result<UpstreamMetrics, UpstreamError>?
    }

    func run(_ client: CurlUpstreamClient, _ request: UpstreamRequest) async throws -> Outcome {
        let loop = group.next()
        let collector = try await loop.submit {
            let collector = Collector(eventLoop: loop)
            collector.task = client.execute(request, eventLoop: loop, handler: collector)
            return NIOLoopBound(collector, eventLoop: loop)
        }.get()
        return try await loop.flatSubmit {
            collector.value.done.futureResult.map {
                Outcome(head: collector.value.head, body: collector.value.body, result: collector.value.result)
            }
        }.get()
    }

    @Test("a request and its response cross the curl thread intact")
    func roundTrip() async throws {
        let server = try await BackendServer.start(handler: DemoBackends.echo)
        let client = CurlUpstreamClient()
        defer { client.shutdown() }
        let request = UpstreamRequest(
            method: "PATCH", url: "http://127.0.0.1:\(server.port)/p/q?r=s", headers: [("X-One", "1"), ("Content-Type", "text/plain")],
            body: ByteBuffer(string: "payload"))
        let collector = try await run(client, request)
        let head = try #require(collector.head)
        #expect(head.status == 200)
        #expect(head.headers.contains { $0.name.lowercased() == "content-type" && $0.value == "application/json" })
        let text = String(buffer: collector.body)
        #expect(text.contains("\"method\":\"PATCH\""))
        #expect(text.contains("\"body\":\"payload\""))
        #expect(text.contains("\"x-one\":\"1\""))
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
                UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/big"), eventLoop: loop, handler: collector)
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
        let closed = try await BackendServer.start { _ in .hang }
        let closedPort = closed.port
        try await closed.shutdown()
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

    @Test("a cancelled exchange delivers nothing more")
    func cancel() async throws {
        let server = try await BackendServer.start { _ in .hang }
        let client = CurlUpstreamClient()
        defer { client.shutdown() }
        let loop = group.next()
        let bound = try await loop.submit {
            let collector = Collector(eventLoop: loop)
            collector.task = client.execute(
                UpstreamRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/"), eventLoop: loop, handler: collector)
            return NIOLoopBound(collector, eventLoop: loop)
        }.get()
        try await Task.sleep(for: .milliseconds(100))
        try await loop.submit { bound.value.task?.cancel() }.get()
        try await Task.sleep(for: .milliseconds(300))
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
