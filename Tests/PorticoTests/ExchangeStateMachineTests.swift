import NIOCore
import NIOHTTP1
import PorticoPolicy
import Testing

@testable import Portico

/// The exchange state machine on its own: events in, actions out, no channel.
@Suite struct ExchangeStateMachineTests {
    static let snapshot: PolicySnapshot = {
        let text = """
            listeners:
              - { name: main, address: 127.0.0.1, port: 0 }
            limits: { maxBodyBytes: 1000 }
            backends:
              quotes: { url: "http://127.0.0.1:9" }
            services:
              quotes:
                path: /quotes
                versions:
                  1: { proxy: { backend: quotes } }
            """
        return try! PolicyLoader().load(sources: [(file: "machine.yaml", text: text)])
    }()

    static func exchange(_ fields: [(String, String)] = [], version: HTTPVersion = .http1_1, serial: Int = 1) -> Exchange {
        var head = HTTPRequestHead(version: version, method: .POST, uri: "/quotes")
        head.headers.add(name: "host", value: "example.test")
        for (name, value) in fields { head.headers.add(name: name, value: value) }
        return Exchange(head: head, requestID: "r\(serial)", policy: CompiledPolicy(snapshot), client: ClientConnection())
    }

    static func name(_ action: ExchangeStateMachine.Action) -> String {
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
        var machine = ExchangeStateMachine()
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
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange([("content-length", "10")])
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.stagesFinished(exchange, answer: .notFound(path: "/x"))) == "answer 404 discardRest")
        #expect(Self.name(machine.bodyReceived(ByteBuffer(string: "0123456789"))) == "none")
        #expect(exchange.drainedBytes == 10)
        #expect(Self.name(machine.endReceived()) == "drainFinished")
        #expect(Self.name(machine.headReceived(Self.exchange(serial: 2))) == "runStages")
    }

    @Test func anEarlyAnswerClosesWhenTheBodyIsTooLongToDrainOrTheClientAwaitsContinue() {
        var machine = ExchangeStateMachine()
        let long = Self.exchange([("content-length", String(ExchangeStateMachine.maxDrainBytes + 1))])
        _ = machine.headReceived(long)
        #expect(Self.name(machine.stagesFinished(long, answer: .notFound(path: "/x"))) == "answer 404 close")
        #expect(Self.name(machine.endReceived()) == "none")

        var second = ExchangeStateMachine()
        let waiting = Self.exchange([("content-length", "10"), ("expect", "100-continue")])
        _ = second.headReceived(waiting)
        #expect(Self.name(second.stagesFinished(waiting, answer: .notFound(path: "/x"))) == "answer 404 close")
    }

    @Test func aDroppedChunkedBodyThatTurnsOutLongClosesTheConnection() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange([("transfer-encoding", "chunked")])
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.stagesFinished(exchange, answer: .notFound(path: "/x"))) == "answer 404 discardRest")
        let chunk = ByteBuffer(repeating: 0x61, count: 40 * 1024)
        #expect(Self.name(machine.bodyReceived(chunk)) == "none")
        #expect(Self.name(machine.bodyReceived(chunk)) == "close")
        #expect(Self.name(machine.endReceived()) == "none")
    }

    @Test func aBodyOverTheLimitIsAnswered413AndClosed() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange([("transfer-encoding", "chunked")])
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        #expect(Self.name(machine.bodyReceived(ByteBuffer(repeating: 0x61, count: 600))) == "none")
        #expect(Self.name(machine.bodyReceived(ByteBuffer(repeating: 0x61, count: 600))) == "answer 413 close")
    }

    @Test func continueIsSentOnlyOnceTheStagesAdmittedTheRequest() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange([("content-length", "3"), ("expect", "100-continue")])
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.stagesFinished(exchange, answer: nil)) == "sendContinue")
        #expect(!exchange.awaitingContinue)
        _ = machine.bodyReceived(ByteBuffer(string: "abc"))
        #expect(Self.name(machine.endReceived()) == "handle")

        var other = ExchangeStateMachine()
        let unknown = Self.exchange([("content-length", "3"), ("expect", "something-else")])
        _ = other.headReceived(unknown)
        #expect(Self.name(other.stagesFinished(unknown, answer: nil)) == "answer 417 close")
    }

    @Test func anHTTP10ExpectationIsIgnored() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange([("content-length", "3"), ("expect", "100-continue")], version: .http1_0)
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.stagesFinished(exchange, answer: nil)) == "none")
    }

    @Test func whileAStageIsSuspendedTheBodyAndEndAreKeptForTheHandler() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange([("content-length", "2")])
        _ = machine.headReceived(exchange)
        #expect(Self.name(machine.bodyReceived(ByteBuffer(string: "ok"))) == "none")
        #expect(Self.name(machine.endReceived()) == "requestEnded")
        #expect(Self.name(machine.stagesFinished(exchange, answer: nil)) == "handle")
        #expect(exchange.body.map { String(buffer: $0) } == "ok")
    }

    @Test func anAnswerAfterTheRequestEndedWhileSuspendedGoesStraightToTheNextRequest() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange()
        _ = machine.headReceived(exchange)
        _ = machine.endReceived()
        #expect(Self.name(machine.stagesFinished(exchange, answer: .notFound(path: "/x"))) == "answer 404 nextRequest")
        #expect(Self.name(machine.headReceived(Self.exchange(serial: 2))) == "runStages")
    }

    @Test func eventsForAnExchangeThatIsNoLongerCurrentAreIgnored() {
        var machine = ExchangeStateMachine()
        let first = Self.exchange()
        _ = machine.headReceived(first)
        #expect(Self.name(machine.channelInactive()) == "abandon")
        #expect(Self.name(machine.stagesFinished(first, answer: nil)) == "none")
        #expect(Self.name(machine.responseEnded(first)) == "none")

        var other = ExchangeStateMachine()
        let current = Self.exchange(serial: 1)
        let stale = Self.exchange(serial: 2)
        _ = other.headReceived(current)
        #expect(Self.name(other.stagesFinished(stale, answer: nil)) == "none")
        #expect(other.isCurrent(current) && !other.isCurrent(stale))
    }

    @Test func theClientLeavingMidResponseAbandonsTheHandlersWork() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange()
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        #expect(Self.name(machine.endReceived()) == "handle")
        #expect(Self.name(machine.channelInactive()) == "abandon")
        #expect(Self.name(machine.endReceived()) == "none")
    }

    @Test func aResponseThatBreaksAfterItsHeadClosesAndOneWithoutKeepAliveEndsClosing() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange()
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        _ = machine.endReceived()
        #expect(Self.name(machine.responseFailed(exchange)) == "abortResponse")
        #expect(Self.name(machine.headReceived(Self.exchange(serial: 2))) == "none")

        var other = ExchangeStateMachine()
        let closing = Self.exchange([("connection", "close")])
        _ = other.headReceived(closing)
        _ = other.stagesFinished(closing, answer: nil)
        _ = other.endReceived()
        #expect(Self.name(other.responseEnded(closing)) == "finishResponse closing=true")
    }

    @Test func aHandlersProblemKeepsTheConnectionUnlessItMustClose() {
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange()
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        _ = machine.endReceived()
        #expect(Self.name(machine.handlerAnswered(exchange, .badGateway(backend: "b"))) == "answer 502 nextRequest")
    }

    @Test func aPipelinedRequestWaitsUntilTheCurrentResponseHasEnded() {
        var machine = ExchangeStateMachine()
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
        var machine = ExchangeStateMachine()
        let exchange = Self.exchange([("transfer-encoding", "chunked")])
        _ = machine.headReceived(exchange)
        _ = machine.stagesFinished(exchange, answer: nil)
        #expect(Self.name(machine.parserErrorReceived(.malformedRequest("bad chunk"))) == "refuse 400 exchange")
        #expect(!machine.isCurrent(exchange))

        var answered = ExchangeStateMachine()
        let early = Self.exchange()
        _ = answered.headReceived(early)
        _ = answered.stagesFinished(early, answer: .notFound(path: "/x"))
        #expect(Self.name(answered.parserErrorReceived(.malformedRequest("bad"))) == "close")
    }

    @Test func shuttingDownClosesAnIdleConnectionAndMakesTheCurrentExchangeTheLast() {
        var idle = ExchangeStateMachine()
        #expect(Self.name(idle.quiesce()) == "close")

        var busy = ExchangeStateMachine()
        let exchange = Self.exchange()
        _ = busy.headReceived(exchange)
        _ = busy.stagesFinished(exchange, answer: nil)
        _ = busy.endReceived()
        #expect(Self.name(busy.quiesce()) == "none")
        #expect(Self.name(busy.responseEnded(exchange)) == "finishResponse closing=true")

        var draining = ExchangeStateMachine()
        let answered = Self.exchange([("content-length", "4")])
        _ = draining.headReceived(answered)
        _ = draining.stagesFinished(answered, answer: .notFound(path: "/x"))
        _ = draining.quiesce()
        #expect(Self.name(draining.endReceived()) == "close")
    }

    @Test func aClientLeavingMidUploadIsLoggedAndAParseErrorBetweenRequestsHasNoExchange() {
        var machine = ExchangeStateMachine()
        let upload = Self.exchange([("content-length", "10")])
        _ = machine.headReceived(upload)
        _ = machine.stagesFinished(upload, answer: nil)
        _ = machine.bodyReceived(ByteBuffer(string: "abc"))
        #expect(Self.name(machine.channelInactive()) == "abandon")

        var idle = ExchangeStateMachine()
        #expect(Self.name(idle.parserErrorReceived(.malformedRequest("bad"))) == "refuse 400")
    }
}
