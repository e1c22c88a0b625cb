import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import PorticoUpstream

/// One timer for many exchanges' deadlines, on an `EmbeddedEventLoop`'s clock.
@Suite struct UpstreamDeadlinesTests {
    static func exchange(_ loop: EmbeddedEventLoop, timeout: Duration) -> (UpstreamExchange, ExchangeRecorder) {
        let recorder = ExchangeRecorder(eventLoop: loop)
        let exchange = UpstreamExchange(
            eventLoop: loop, origin: UpstreamOrigin(host: "127.0.0.1", port: 9), method: "GET",
            head: ByteBuffer(string: "GET / HTTP/1.1\r\nHost: backend\r\n\r\n"), body: nil, keepAlive: true, timeout: timeout,
            connectTimeout: .seconds(1), handler: recorder)
        return (exchange, recorder)
    }

    /// Completes the recorders' promises that no result completed (NIO refuses to drop one).
    static func settle(_ recorders: [ExchangeRecorder]) {
        for recorder in recorders where recorder.result == nil { recorder.done.succeed(()) }
    }

    static func timedOut(_ recorder: ExchangeRecorder) -> Bool {
        if case .failure(let error) = recorder.result { return error.kind == .timedOut }
        return false
    }

    @Test func eachDeadlineFiresAtItsTimeInDeadlineOrderWhateverTheOrderOfArming() {
        let loop = EmbeddedEventLoop()
        let deadlines = UpstreamDeadlines(eventLoop: loop)
        let (late, lateRecorder) = Self.exchange(loop, timeout: .seconds(5))
        let (early, earlyRecorder) = Self.exchange(loop, timeout: .seconds(2))
        let (middle, middleRecorder) = Self.exchange(loop, timeout: .seconds(3))
        late.armTimeout(in: deadlines)
        early.armTimeout(in: deadlines)
        middle.armTimeout(in: deadlines)
        #expect(deadlines.count == 3)
        loop.advanceTime(by: .seconds(2) - .nanoseconds(1))
        #expect(earlyRecorder.result == nil)
        loop.advanceTime(by: .nanoseconds(1))
        #expect(Self.timedOut(earlyRecorder) && middleRecorder.result == nil && lateRecorder.result == nil)
        loop.advanceTime(by: .seconds(1))
        #expect(Self.timedOut(middleRecorder) && lateRecorder.result == nil)
        loop.advanceTime(by: .seconds(2))
        #expect(Self.timedOut(lateRecorder))
        #expect(deadlines.count == 0)
    }

    @Test func aRemovedDeadlineNeverFiresAndTheTimerMovesOnToTheNext() {
        let loop = EmbeddedEventLoop()
        let deadlines = UpstreamDeadlines(eventLoop: loop)
        let (first, firstRecorder) = Self.exchange(loop, timeout: .seconds(1))
        let (second, secondRecorder) = Self.exchange(loop, timeout: .seconds(4))
        first.armTimeout(in: deadlines)
        second.armTimeout(in: deadlines)
        deadlines.remove(first)
        deadlines.remove(first)  // twice: nothing more happens
        #expect(deadlines.count == 1)
        // The timer still wakes at the first deadline, finds nothing due, and waits for the second.
        loop.advanceTime(by: .seconds(1))
        #expect(firstRecorder.result == nil && secondRecorder.result == nil)
        loop.advanceTime(by: .seconds(3) - .nanoseconds(1))
        #expect(secondRecorder.result == nil)
        loop.advanceTime(by: .nanoseconds(1))
        #expect(Self.timedOut(secondRecorder))
        #expect(firstRecorder.result == nil)
        Self.settle([firstRecorder])
    }

    @Test func manyExchangesWithOneTimeoutKeepTheirOrderAndOnlyTheUnfinishedOnesTimeOut() {
        let loop = EmbeddedEventLoop()
        let deadlines = UpstreamDeadlines(eventLoop: loop)
        var recorders: [ExchangeRecorder] = []
        var exchanges: [UpstreamExchange] = []
        for _ in 0..<100 {
            let (exchange, recorder) = Self.exchange(loop, timeout: .seconds(10))
            exchange.armTimeout(in: deadlines)
            exchanges.append(exchange)
            recorders.append(recorder)
            loop.advanceTime(by: .milliseconds(10))
        }
        for (index, exchange) in exchanges.enumerated() where index % 2 == 0 { deadlines.remove(exchange) }
        #expect(deadlines.count == 50)
        loop.advanceTime(by: .seconds(9))
        #expect(recorders.allSatisfy { $0.result == nil })
        loop.advanceTime(by: .seconds(1))
        for (index, recorder) in recorders.enumerated() {
            #expect(Self.timedOut(recorder) == (index % 2 == 1))
        }
        #expect(deadlines.count == 0)
        Self.settle(recorders)
    }
}
