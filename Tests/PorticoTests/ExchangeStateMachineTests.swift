import NIOCore
import NIOHTTP1
import PorticoPolicy
import Testing

@testable import Portico

/// The exchange state machine on its own: events in, actions out, no channel.
@Suite struct ExchangeStateMachineTests {
    /// An exchange as the machine sees it: its framing and its body, no policy.
    final class TestExchange: FramedExchange {
        var framing: RequestFraming
        var body: ByteBuffer?
        let serial: Int

        init(framing: RequestFraming, serial: Int) {
            self.framing = framing
            self.serial = serial
        }
    }

    typealias Machine = ExchangeStateMachine<TestExchange>

    static func exchange(_ fields: [(String, String)] = [], version: HTTPVersion = .http1_1, serial: Int = 1) -> TestExchange {
        var head = HTTPRequestHead(version: version, method: .POST, uri: "/quotes")
        head.headers.add(name: "host", value: "example.test")
        for (name, value) in fields { head.headers.add(name: name, value: value) }
        return TestExchange(framing: RequestFraming(head: head, maxBodyBytes: 1000), serial: serial)
    }

    static func name(_ action: Machine.Action) -> String {
        switch action {
        case .none: "none"
        case .runStages: "runStages"
        case .requestEnded: "requestEnded"
        case .sendContinue: "sendContinue"
        case .handle: "handle"
        case .answer(_, let problem, let after): "answer \(problem.status.code) \(after)"
        case .finishResponse(_, let closing): "finishResponse closing=\(closing)"
        case .abortResponse: "abortResponse"
        case .drainFinished: "drainFinished"
        case .abandon: "abandon"
        case .close: "close"
        case .refuse(let problem, let exchange): "refuse \(problem.status.code)\(exchange == nil ? "" : " exchange")"
        }
    }

    @Test func aRequestWithABodyIsHandledAtItsEndAndTheConnectionWaitsForTheNext() {
        var machine = Machine()
        let exchange = Self.exchange([("content-length", "5")])
        #expect(Self.name(machine.headReceived(exchange)) == "runStages")
        #expect(Self.name(machine.stagesFinished(exchange, answer: nil)) == "none")
        #expect(Self.name(machine.bodyReceived(ByteBuffer(string: "hel"))) == "none")
        #expect(Self.name(machine.bodyReceived(ByteBuffer(string: "lo"))) == "none")
        #expect(Self.name(machine.endReceived()) == "handle")
        #expect(exchange.body.map { String(buffer: $0) } == "hello")
        #expect(Self.name(machine.responseEnded(exchange)) == "finishResponse closing=false")
        #expect(!machine.isCurrent(exchange))
        #expect(Self.name(machine.headReceived(Self.exchange(serial: 2))) == "runStages")
    }

    @Test func anEarlyAnswerDropsTheRestOfASmallBodyThenServesTheNextRequest() {
        var machine = Machine()
        let exchange = Self.exchange([("content-length", "10")])
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.stagesFinished(exchange, answer: .notFound(path: "/x"))) == "answer 404 discardRest")
        #expect(Self.name(machine.bodyReceived(ByteBuffer(string: "0123456789"))) == "none")
        #expect(exchange.framing.drainedBytes == 10)
        #expect(Self.name(machine.endReceived()) == "drainFinished")
        #expect(Self.name(machine.headReceived(Self.exchange(serial: 2))) == "runStages")
    }

    @Test func anEarlyAnswerClosesWhenTheBodyIsTooLongToDrainOrTheClientAwaitsContinue() {
        var machine = Machine()
        let long = Self.exchange([("content-length", String(RequestFraming.maxDrainBytes + 1))])
        _ = machine.headReceived(long)
        #expect(Self.name(machine.stagesFinished(long, answer: .notFound(path: "/x"))) == "answer 404 close")
        #expect(Self.name(machine.endReceived()) == "none")

        var second = Machine()
        let waiting = Self.exchange([("content-length", "10"), ("expect", "100-continue")])
        _ = second.headReceived(waiting)
        #expect(Self.name(second.stagesFinished(waiting, answer: .notFound(path: "/x"))) == "answer 404 close")
    }

    @Test func aDroppedChunkedBodyThatTurnsOutLongClosesTheConnection() {
        var machine = Machine()
        let exchange = Self.exchange([("transfer-encoding", "chunked")])
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.stagesFinished(exchange, answer: .notFound(path: "/x"))) == "answer 404 discardRest")
        let chunk = ByteBuffer(repeating: 0x61, count: 40 * 1024)
        #expect(Self.name(machine.bodyReceived(chunk)) == "none")
        #expect(Self.name(machine.bodyReceived(chunk)) == "close")
        #expect(Self.name(machine.endReceived()) == "none")
    }

    @Test func aBodyOverTheLimitIsAnswered413AndClosed() {
        var machine = Machine()
        let exchange = Self.exchange([("transfer-encoding", "chunked")])
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        #expect(Self.name(machine.bodyReceived(ByteBuffer(repeating: 0x61, count: 600))) == "none")
        #expect(Self.name(machine.bodyReceived(ByteBuffer(repeating: 0x61, count: 600))) == "answer 413 close")
    }

    @Test func continueIsSentOnlyOnceTheStagesAdmittedTheRequest() {
        var machine = Machine()
        let exchange = Self.exchange([("content-length", "3"), ("expect", "100-continue")])
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.stagesFinished(exchange, answer: nil)) == "sendContinue")
        #expect(!exchange.framing.awaitingContinue)
        _ = machine.bodyReceived(ByteBuffer(string: "abc"))
        #expect(Self.name(machine.endReceived()) == "handle")

        var other = Machine()
        let unknown = Self.exchange([("content-length", "3"), ("expect", "something-else")])
        _ = other.headReceived(unknown)
        #expect(Self.name(other.stagesFinished(unknown, answer: nil)) == "answer 417 close")
    }

    @Test func anHTTP10ExpectationIsIgnored() {
        var machine = Machine()
        let exchange = Self.exchange([("content-length", "3"), ("expect", "100-continue")], version: .http1_0)
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.stagesFinished(exchange, answer: nil)) == "none")
    }

    @Test func whileAStageIsSuspendedTheBodyAndEndAreKeptForTheHandler() {
        var machine = Machine()
        let exchange = Self.exchange([("content-length", "2")])
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.bodyReceived(ByteBuffer(string: "ok"))) == "none")
        #expect(Self.name(machine.endReceived()) == "requestEnded")
        #expect(Self.name(machine.stagesFinished(exchange, answer: nil)) == "handle")
        #expect(exchange.body.map { String(buffer: $0) } == "ok")
    }

    @Test func anAnswerAfterTheRequestEndedWhileSuspendedGoesStraightToTheNextRequest() {
        var machine = Machine()
        let exchange = Self.exchange()
        _ = machine.headReceived(exchange)
        _ = machine.endReceived()
        #expect(Self.name(machine.stagesFinished(exchange, answer: .notFound(path: "/x"))) == "answer 404 nextRequest")
        #expect(Self.name(machine.headReceived(Self.exchange(serial: 2))) == "runStages")
    }

    @Test func eventsForAnExchangeThatIsNoLongerCurrentAreIgnored() {
        var machine = Machine()
        let first = Self.exchange()
        _ = machine.headReceived(first)
        #expect(Self.name(machine.channelInactive()) == "abandon")
        #expect(Self.name(machine.stagesFinished(first, answer: nil)) == "none")
        #expect(Self.name(machine.responseEnded(first)) == "none")

        var other = Machine()
        let current = Self.exchange(serial: 1)
        let stale = Self.exchange(serial: 2)
        _ = other.headReceived(current)
        #expect(Self.name(other.stagesFinished(stale, answer: nil)) == "none")
        #expect(other.isCurrent(current) && !other.isCurrent(stale))
    }

    @Test func theClientLeavingMidResponseAbandonsTheHandlersWork() {
        var machine = Machine()
        let exchange = Self.exchange()
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        #expect(Self.name(machine.endReceived()) == "handle")
        #expect(Self.name(machine.channelInactive()) == "abandon")
        #expect(Self.name(machine.endReceived()) == "none")
    }

    @Test func aResponseThatBreaksAfterItsHeadClosesAndOneWithoutKeepAliveEndsClosing() {
        var machine = Machine()
        let exchange = Self.exchange()
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        _ = machine.endReceived()
        #expect(Self.name(machine.responseFailed(exchange)) == "abortResponse")
        #expect(Self.name(machine.headReceived(Self.exchange(serial: 2))) == "none")

        var other = Machine()
        let closing = Self.exchange([("connection", "close")])
        _ = other.headReceived(closing)
        _ = other.stagesFinished(closing, answer: nil)
        _ = other.endReceived()
        #expect(Self.name(other.responseEnded(closing)) == "finishResponse closing=true")
    }

    @Test func aHandlersProblemKeepsTheConnectionUnlessItMustClose() {
        var machine = Machine()
        let exchange = Self.exchange()
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        _ = machine.endReceived()
        #expect(Self.name(machine.handlerAnswered(exchange, .badGateway(backend: "b"))) == "answer 502 nextRequest")
    }

    @Test func aPipelinedRequestWaitsUntilTheCurrentResponseHasEnded() {
        var machine = Machine()
        let exchange = Self.exchange()
        let next = HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/next"))
        #expect(machine.accepts(next))
        _ = machine.headReceived(exchange)
        #expect(!machine.accepts(next))
        #expect(machine.accepts(.end(nil)))
        _ = machine.stagesFinished(exchange, answer: nil)
        _ = machine.endReceived()
        #expect(!machine.accepts(next) && !machine.accepts(.end(nil)) && !machine.acceptsParserError)
        _ = machine.responseEnded(exchange)
        #expect(machine.accepts(next) && machine.acceptsParserError)
    }

    @Test func aParseErrorIsAnsweredUnlessAResponseIsUnderWay() {
        var machine = Machine()
        let exchange = Self.exchange([("transfer-encoding", "chunked")])
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        #expect(Self.name(machine.parserErrorReceived(.malformedRequest("bad chunk"))) == "refuse 400 exchange")
        #expect(!machine.isCurrent(exchange))

        var answered = Machine()
        let early = Self.exchange()
        _ = answered.headReceived(early)
        _ = answered.stagesFinished(early, answer: .notFound(path: "/x"))
        #expect(Self.name(answered.parserErrorReceived(.malformedRequest("bad"))) == "close")
    }

    @Test func shuttingDownClosesAnIdleConnectionAndMakesTheCurrentExchangeTheLast() {
        var idle = Machine()
        #expect(Self.name(idle.quiesce()) == "close")

        var busy = Machine()
        let exchange = Self.exchange()
        _ = busy.headReceived(exchange)
        _ = busy.stagesFinished(exchange, answer: nil)
        _ = busy.endReceived()
        #expect(Self.name(busy.quiesce()) == "none")
        #expect(Self.name(busy.responseEnded(exchange)) == "finishResponse closing=true")

        var draining = Machine()
        let answered = Self.exchange([("content-length", "4")])
        _ = draining.headReceived(answered)
        _ = draining.stagesFinished(answered, answer: .notFound(path: "/x"))
        _ = draining.quiesce()
        #expect(Self.name(draining.endReceived()) == "close")
    }

    @Test func aClientLeavingMidUploadIsLoggedAndAParseErrorBetweenRequestsHasNoExchange() {
        var machine = Machine()
        let upload = Self.exchange([("content-length", "10")])
        _ = machine.headReceived(upload)
        _ = machine.stagesFinished(upload, answer: nil)
        _ = machine.bodyReceived(ByteBuffer(string: "abc"))
        #expect(Self.name(machine.channelInactive()) == "abandon")

        var idle = Machine()
        #expect(Self.name(idle.parserErrorReceived(.malformedRequest("bad"))) == "refuse 400")
    }

    // MARK: Flow: held reads, pipelining, flushes, credit

    /// Takes `exchange` from its head to its handler (a request without a body, admitted).
    static func handle(_ exchange: TestExchange, on machine: inout Machine) {
        _ = machine.headReceived(exchange)
        _ = machine.endReceived()
        _ = machine.stagesFinished(exchange, answer: nil)
    }

    static func head() -> HTTPServerRequestPart {
        .head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/quotes", headers: ["host": "example.test"]))
    }

    @Test func aPipelinedRequestWaitsBehindTheCurrentOneAndHoldsTheReadUntilItIsTaken() {
        var machine = Machine()
        let first = Self.exchange()
        let result1 = machine.takesNow(Self.head())
        #expect(result1)
        #expect(Self.name(machine.headReceived(first)) == "runStages")
        let result2 = machine.takesNow(.end(nil))
        #expect(result2)
        #expect(Self.name(machine.endReceived()) == "requestEnded")
        #expect(Self.name(machine.stagesFinished(first, answer: nil)) == "handle")

        // The next request's head arrives while the first is answered: it waits, and so do reads.
        let result3 = machine.takesNow(Self.head())
        #expect(!result3)
        let result4 = machine.takesNow(.end(nil))
        #expect(!result4)
        let result5 = machine.readRequested()
        #expect(result5 == .hold)
        #expect(machine.hasWaitingInput)
        let result6 = machine.deliveryBegins()
        #expect(result6)
        let result7 = machine.nextPipelined()
        #expect(result7 == nil)
        let result8 = machine.deliveryEnds()
        #expect(!result8)

        #expect(Self.name(machine.responseEnded(first)) == "finishResponse closing=false")
        let result9 = machine.deliveryBegins()
        #expect(result9)
        let result10 = machine.deliveryBegins()
        #expect(!result10, "a hand-over already under way is not begun again")
        guard case .part(.head) = machine.nextPipelined() else {
            Issue.record("the waiting head was not handed over first")
            return
        }
        let second = Self.exchange(serial: 2)
        #expect(Self.name(machine.headReceived(second)) == "runStages")
        guard case .part(.end) = machine.nextPipelined() else {
            Issue.record("the waiting end was not handed over next")
            return
        }
        #expect(Self.name(machine.endReceived()) == "requestEnded")
        let result11 = machine.nextPipelined()
        #expect(result11 == nil)
        let result12 = machine.deliveryEnds()
        #expect(result12, "the held read is passed on once nothing waits")
        #expect(!machine.hasWaitingInput)
        let result13 = machine.readRequested()
        #expect(result13 == .read)
    }

    @Test func aParseErrorBehindAResponseWaitsForItAndAClosedConnectionReadsNothing() {
        var machine = Machine()
        let first = Self.exchange()
        Self.handle(first, on: &machine)
        let result14 = machine.takesParserErrorNow(.invalidVersion)
        #expect(!result14)
        let result15 = machine.nextPipelined()
        #expect(result15 == nil)
        _ = machine.responseEnded(first)
        guard case .parserError = machine.nextPipelined() else {
            Issue.record("the parse error was not handed over once the response ended")
            return
        }
        #expect(Self.name(machine.parserErrorReceived(.malformedRequest("bad"))) == "refuse 400")
        let result16 = machine.readRequested()
        #expect(result16 == .hold)

        var leaving = Machine()
        let current = Self.exchange()
        Self.handle(current, on: &leaving)
        _ = leaving.takesNow(Self.head())
        _ = leaving.readRequested()
        #expect(Self.name(leaving.channelInactive()) == "abandon")
        #expect(!leaving.hasWaitingInput, "what waited is forgotten with the connection")
    }

    @Test func writesInAReadBatchAreFlushedOnceAtItsEndAndOthersAtOnce() {
        var machine = Machine()
        let result17 = machine.wrote()
        #expect(result17, "outside a read batch a write is flushed at once")
        _ = machine.takesNow(Self.head())
        let result18 = machine.wrote()
        #expect(!result18)
        let result19 = machine.wrote()
        #expect(!result19)
        let result20 = machine.readBatchEnded()
        #expect(result20, "the batch's writes are flushed once, at its end")
        let result21 = machine.readBatchEnded()
        #expect(!result21)
        _ = machine.takesNow(Self.head())
        _ = machine.wrote()
        let result22 = machine.takePendingFlush()
        #expect(result22, "a close flushes what waits first")
        let result23 = machine.readBatchEnded()
        #expect(!result23)
    }

    @Test func theBackendIsOwedCreditOnlyForTheCurrentResponseAndNotAfterItEnded() {
        var machine = Machine()
        let exchange = Self.exchange()
        Self.handle(exchange, on: &machine)
        let result24 = machine.creditDue()
        #expect(result24 == nil)
        machine.responseBodyWritten(bytes: 100)
        machine.responseBodyWritten(bytes: 20)
        let due = machine.creditDue()
        #expect(due?.0 === exchange)
        #expect(due?.1 == 120)
        let result25 = machine.creditDue()
        #expect(result25 == nil, "credit is returned once")
        machine.responseBodyWritten(bytes: 5)
        _ = machine.responseEnded(exchange)
        let result26 = machine.creditDue()
        #expect(result26 == nil)
    }

    @Test func anHTTP10ResponseOfUnknownLengthClosesTheConnection() {
        var known = Machine()
        let sized = Self.exchange([("connection", "keep-alive")], version: .http1_0)
        Self.handle(sized, on: &known)
        let result27 = known.responseBegins(sized, lengthKnown: true)
        #expect(!result27)
        #expect(Self.name(known.responseEnded(sized)) == "finishResponse closing=false")

        var unknown = Machine()
        let streamed = Self.exchange([("connection", "keep-alive")], version: .http1_0)
        Self.handle(streamed, on: &unknown)
        let result28 = unknown.responseBegins(streamed, lengthKnown: false)
        #expect(result28)
        #expect(Self.name(unknown.responseEnded(streamed)) == "finishResponse closing=true")

        var eleven = Machine()
        let chunked = Self.exchange()
        Self.handle(chunked, on: &eleven)
        let result29 = eleven.responseBegins(chunked, lengthKnown: false)
        #expect(!result29, "HTTP/1.1 frames it with chunked coding")
    }
}
