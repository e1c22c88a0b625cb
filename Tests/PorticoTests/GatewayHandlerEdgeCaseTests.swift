import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream
import Testing

@testable import Portico

/// Edge cases of the gateway handler found in review: early answers followed by a close in the same
/// read, parse errors behind a request still being served, stages resuming late. On an
/// `EmbeddedChannel` with a socket-like close at the bottom (a real socket drops writes not yet
/// flushed when it closes; `EmbeddedChannel` would keep them and hide the loss).
@Suite struct GatewayHandlerEdgeCaseTests {
    static let policy = """
        listeners:
          - { name: embedded, address: 127.0.0.1, port: 0 }
        accessLog: { enabled: false }
        limits: { maxBodyBytes: 100 }
        backends:
          quotes: { url: "http://127.0.0.1:9" }
        services:
          open:
            path: /open
            auth: none
            versions:
              1: { proxy: { backend: quotes } }
        """

    final class CountingStage: RequestStage {
        let count = NIOLockedValueBox(0)
        func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
            count.withLockedValue { $0 += 1 }
            return .proceed
        }
    }

    /// Records each exchange's handler; the test delivers events by hand.
    final class ControlledUpstream: UpstreamClient, @unchecked Sendable {
        var handlers: [any UpstreamResponseHandler] = []
        func execute(_ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler) -> any UpstreamTask {
            handlers.append(handler)
            return Task()
        }
        func shutdown() {}
        struct Task: UpstreamTask {
            func cancel() {}
            func consumed(bytes: Int) {}
        }
    }

    /// Like a socket channel: a close fails every write not yet flushed (EmbeddedChannel keeps them).
    final class SocketLikeClose: ChannelOutboundHandler {
        typealias OutboundIn = IOData
        var unflushed: [(NIOAny, EventLoopPromise<Void>?)] = []
        var droppedAtClose = 0
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            unflushed.append((data, promise))
        }
        func flush(context: ChannelHandlerContext) {
            for (data, promise) in unflushed { context.write(data, promise: promise) }
            unflushed.removeAll()
            context.flush()
        }
        func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
            droppedAtClose += unflushed.count
            for (_, promise) in unflushed { promise?.fail(ChannelError.ioOnClosedChannel) }
            unflushed.removeAll()
            context.close(mode: mode, promise: promise)
        }
    }

    /// The pipeline with a socket-like close at the bottom, a controlled upstream and a stage counter.
    struct Connection {
        let staged: StagedConnection
        let socket = SocketLikeClose()
        let counting = CountingStage()
        let upstream = ControlledUpstream()

        init(stages makeStages: (GatewayServices, ParkedStage, CountingStage) -> RequestStages) throws {
            let counting = self.counting
            staged = try StagedConnection(policy: GatewayHandlerEdgeCaseTests.policy, upstream: upstream, bottom: socket) {
                services, parked in
                makeStages(services, parked, counting)
            }
        }

        var channel: EmbeddedChannel { staged.channel }
        func send(_ text: String) { staged.send(text) }
        func output() throws -> String { try staged.output() }
        func resume(_ outcome: StageOutcome) { staged.resume(outcome) }
    }

    /// A dropped body that turns out too long closes the connection, but only after the early
    /// answer written in the same read batch has left.
    @Test func anEarlyAnswerIsSentEvenWhenTheDroppedChunkedBodyTurnsOutLongInTheSameRead() throws {
        let connection = try Connection { services, _, _ in .standard(services) }
        let chunk = String(repeating: "x", count: 70_000)
        let request =
            "POST /nowhere HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            + String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n"
        connection.send(request)
        let output = try connection.output()
        #expect(output.hasPrefix("HTTP/1.1 404 "), "got: \(output.prefix(80))")
        #expect(connection.socket.droppedAtClose == 0)
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
    }

    /// The same when the dropped body turns out malformed.
    @Test func anEarlyAnswerIsSentEvenWhenTheDroppedBodyIsMalformedInTheSameRead() throws {
        let connection = try Connection { services, _, _ in .standard(services) }
        connection.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        let output = try connection.output()
        #expect(output.hasPrefix("HTTP/1.1 404 "), "got: \(output.prefix(80))")
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
    }

    /// A parse error after a whole request whose stage is suspended waits for that request's answer.
    @Test func aParseErrorAfterAWholeRequestWaitsForThatRequestsAnswer() throws {
        let connection = try Connection { _, parked, _ in RequestStages(stages: [HeadChecksStage(), parked]) }
        connection.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
        connection.send("\u{1}\u{2} garbage\r\n\r\n")
        let early = try connection.output()
        #expect(early == "", "answered before the first request: \(early.prefix(60))")
        if connection.channel.isActive {
            connection.resume(.answer(.notFound(path: "/a")))
        }
        let output = early + (try connection.output())
        #expect(output.hasPrefix("HTTP/1.1 404 "), "got: \(output.prefix(60))")
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
    }

    /// A suspended stage resuming after its exchange was answered (body too large) runs no later stage.
    @Test func noStageRunsForAnExchangeAlreadyAnswered() throws {
        let connection = try Connection { _, parked, counting in RequestStages(stages: [HeadChecksStage(), parked, counting]) }
        connection.send("POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        connection.send("c8\r\n" + String(repeating: "x", count: 200) + "\r\n")
        #expect(try connection.output().hasPrefix("HTTP/1.1 413 "))
        connection.resume(.proceed)
        #expect(connection.counting.count.withLockedValue { $0 } == 0)
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
    }

    /// Bytes after a parse error reach the decoder in its error state; they must not close the
    /// connection while the response before the error is still awaited.
    @Test func bytesAfterAParseErrorDoNotCutTheResponseInFlight() throws {
        let connection = try Connection { services, _, _ in .standard(services) }
        connection.send("GET /open HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(connection.upstream.handlers.count == 1)
        connection.send("\u{1}\u{2} garbage\r\n\r\n")
        connection.send("more bytes")
        #expect(connection.channel.isActive, "closed while the first response was awaited")
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
    }
}
