import NIOCore
import NIOEmbedded
import NIOHTTP1
import PorticoTestSupport
import Testing

@testable import PorticoUpstream

/// The connection handler on an `EmbeddedChannel`: what it writes, when it reads, what it delivers,
/// with the loop's clock under the test's control.
@Suite("The upstream connection handler")
struct UpstreamConnectionHandlerTests {
    struct Setup {
        let channel: EmbeddedChannel
        let loop: EmbeddedEventLoop
        let handler: UpstreamConnectionHandler
        let counter: ReadCounter
        let recorder: ExchangeRecorder
        let exchange: UpstreamExchange
    }

    /// A connected channel with the handler on top, and an exchange (not yet running) for `method`.
    static func setUp(method: String = "GET", timeout: Duration = .seconds(30), high: Int = 1000, low: Int = 100) throws -> Setup {
        let channel = EmbeddedChannel()
        let loop = channel.embeddedEventLoop
        let origin = UpstreamOrigin(host: "127.0.0.1", port: 8080)
        let configuration = NIOUpstreamClient.Configuration(highWatermark: high, lowWatermark: low)
        // The pool only hears that the connection came back or closed; it does not know it otherwise.
        let pool = UpstreamConnectionPool(origin: origin, eventLoop: loop, configuration: configuration)
        let handler = UpstreamConnectionHandler(id: 1, pool: pool, highWatermark: high, lowWatermark: low)
        let counter = ReadCounter()
        try channel.pipeline.syncOperations.addHandler(counter)
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        let recorder = ExchangeRecorder(eventLoop: loop)
        let head = ByteBuffer(string: "\(method) /x HTTP/1.1\r\nHost: backend\r\n\r\n")
        let exchange = UpstreamExchange(
            eventLoop: loop, origin: origin, method: method, head: head, body: nil, keepAlive: true, timeout: timeout,
            connectTimeout: .seconds(1),
            handler: recorder)
        recorder.task = exchange
        return Setup(channel: channel, loop: loop, handler: handler, counter: counter, recorder: recorder, exchange: exchange)
    }

    /// A response head's bytes; chunked by default: a body that streams batch by batch (a small
    /// Content-Length body is held whole).
    static func responseHead(_ fields: KeyValuePairs<String, String> = ["Transfer-Encoding": "chunked"]) -> ByteBuffer {
        ByteBuffer(string: "HTTP/1.1 200 OK\r\n" + fields.map { "\($0.key): \($0.value)\r\n" }.joined() + "\r\n")
    }

    /// One chunk of a chunked body.
    static func chunk(_ bytes: ByteBuffer) -> ByteBuffer {
        var chunk = ByteBuffer(string: String(bytes.readableBytes, radix: 16) + "\r\n")
        chunk.writeImmutableBuffer(bytes)
        chunk.writeString("\r\n")
        return chunk
    }

    @Test("the request is written once with a read; a batch is delivered in one call; reading waits for credit")
    func readsFollowCredit() throws {
        let setup = try Self.setUp()
        setup.recorder.consumesImmediately = false
        #expect(setup.exchange.run(on: setup.handler))
        // The head as bytes, in one write; nothing more for a request without a body.
        let head = try setup.channel.readOutbound(as: ByteBuffer.self)
        #expect(head.map { String(buffer: $0) } == "GET /x HTTP/1.1\r\nHost: backend\r\n\r\n")
        #expect(try setup.channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(setup.counter.reads == 1)

        // Head and two body parts in one read batch: one delivery, one more read (credit remains).
        let pipeline = setup.channel.pipeline.syncOperations
        pipeline.fireChannelRead(NIOAny(Self.responseHead()))
        pipeline.fireChannelRead(NIOAny(Self.chunk(ByteBuffer(repeating: 1, count: 300))))
        pipeline.fireChannelRead(NIOAny(Self.chunk(ByteBuffer(repeating: 2, count: 300))))
        pipeline.fireChannelReadComplete()
        #expect(setup.recorder.deliveries == 1)
        #expect(setup.recorder.head?.status == 200)
        #expect(setup.recorder.bodyBytes == 600)
        #expect(setup.counter.reads == 2)

        // Over the high watermark (1000): no read until the consumer brings it down to 100.
        try setup.channel.writeInbound(Self.chunk(ByteBuffer(repeating: 3, count: 400)))
        #expect(setup.recorder.deliveries == 2)
        #expect(setup.counter.reads == 2)
        setup.exchange.consumed(bytes: 800)
        #expect(setup.counter.reads == 2)  // 200 outstanding: still above the low watermark
        setup.exchange.consumed(bytes: 100)
        #expect(setup.counter.reads == 3)

        // The end: the result arrives, and the connection, back in its pool, keeps a read pending.
        try setup.channel.writeInbound(ByteBuffer(string: "0\r\n\r\n"))
        #expect(setup.recorder.result.map { if case .success = $0 { true } else { false } } == true)
        #expect(setup.counter.reads == 4)
        #expect(setup.channel.isActive)
        #expect(setup.recorder.offLoopDeliveries == 0)
    }

    @Test("on an EmbeddedEventLoop the exchange times out when the loop's clock reaches its timeout, and the connection closes")
    func timeoutOnTheLoopsClock() throws {
        let setup = try Self.setUp(timeout: .seconds(5))
        setup.exchange.armTimeout(in: UpstreamDeadlines(eventLoop: setup.loop))
        #expect(setup.exchange.run(on: setup.handler))
        try setup.channel.writeInbound(Self.responseHead())
        setup.loop.advanceTime(by: .seconds(5) - .nanoseconds(1))
        #expect(setup.recorder.result == nil)
        #expect(setup.channel.isActive)
        setup.loop.advanceTime(by: .nanoseconds(1))
        guard case .failure(let error) = setup.recorder.result else {
            Issue.record("expected the exchange to time out")
            return
        }
        #expect(error.kind == .timedOut)
        #expect(!setup.channel.isActive)
        #expect(setup.recorder.deliveriesAfterResult == 0)
    }

    @Test("an event stream's timeout runs from its last delivery or the client's last progress, not from the exchange's start")
    func eventStreamIdleClock() throws {
        let setup = try Self.setUp(timeout: .seconds(5))
        setup.recorder.consumesImmediately = false
        setup.exchange.armTimeout(in: UpstreamDeadlines(eventLoop: setup.loop))
        #expect(setup.exchange.run(on: setup.handler))
        setup.loop.advanceTime(by: .seconds(4))
        try setup.channel.writeInbound(
            Self.responseHead(["Transfer-Encoding": "chunked", "Content-Type": "Text/Event-Stream; charset=utf-8"]))
        // Events every 4 s: the stream outlives the 5 s a whole exchange would get.
        for _ in 0..<3 {
            setup.loop.advanceTime(by: .seconds(4))
            try setup.channel.writeInbound(Self.chunk(ByteBuffer(string: "data: tick\n\n")))
        }
        // A client reading the last event moves the clock too.
        setup.loop.advanceTime(by: .seconds(4))
        setup.exchange.consumed(bytes: 12)
        setup.loop.advanceTime(by: .seconds(4))
        #expect(setup.recorder.result == nil)
        #expect(setup.channel.isActive)
        // Then 5 s without anything: the stream is cut, saying why.
        setup.loop.advanceTime(by: .seconds(1))
        guard case .failure(let error) = setup.recorder.result else {
            Issue.record("expected the idle stream to time out")
            return
        }
        #expect(error.kind == .timedOut && error.description.contains("no event within"), "\(error)")
        #expect(!setup.channel.isActive)
    }

    @Test("text/event-stream is told from other types, its parameters and case aside")
    func eventStreamType() {
        for (type, expected) in [
            ("text/event-stream", true), ("TEXT/EVENT-STREAM;charset=utf-8", true), (" text/event-stream ; x=1", true),
            ("text/event-streams", false), ("application/json", false), ("text/plain", false),
        ] {
            #expect(UpstreamResponseHead(status: 200, headers: ["Content-Type": type]).isEventStream == expected, "\(type)")
        }
        #expect(!UpstreamResponseHead(status: 200, headers: [:]).isEventStream)
    }

    @Test("a HEAD answer ends at its head whatever length it declares, and the connection is kept for the next request")
    func headAnswerEndsAtItsHead() throws {
        let setup = try Self.setUp(method: "HEAD")
        #expect(setup.exchange.run(on: setup.handler))
        #expect(
            try setup.channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } == "HEAD /x HTTP/1.1\r\nHost: backend\r\n\r\n")
        try setup.channel.writeInbound(Self.responseHead(["Content-Length": "1234"]))
        guard case .success = setup.recorder.result else {
            Issue.record("expected the exchange to succeed at its head, got \(String(describing: setup.recorder.result))")
            return
        }
        #expect(setup.recorder.head?.contentLength == 1234)
        #expect(setup.recorder.bodyBytes == 0)
        #expect(setup.channel.isActive)
    }

    @Test("bytes past a response's end in the same read fail it before anything was delivered, and the connection closes")
    func bytesPastTheEnd() throws {
        let setup = try Self.setUp()
        #expect(setup.exchange.run(on: setup.handler))
        var bytes = Self.responseHead(["Content-Length": "3"])
        bytes.writeString("abcHTTP/1.1 200 OK\r\n\r\n")
        try setup.channel.writeInbound(bytes)
        guard case .failure(let error) = setup.recorder.result else {
            Issue.record("expected the exchange to fail")
            return
        }
        #expect(error.kind == .badResponse && error.detail.contains("after the end of its response"), "\(error)")
        #expect(setup.recorder.deliveries == 1)  // the failure alone: no head went out
        #expect(setup.recorder.head == nil)
        #expect(!setup.channel.isActive)
    }

    @Test("a response nobody asked for closes an idle connection")
    func strayResponseWhileIdle() throws {
        let setup = try Self.setUp()
        try setup.channel.writeInbound(Self.responseHead())
        #expect(!setup.channel.isActive)
    }
}
