import NIOCore
import NIOHTTP1

/// What the machine reads and keeps of an exchange: how its request is framed, and its body as it
/// arrives. A protocol so that the machine's tests drive it with plain objects, without a policy.
protocol FramedExchange: AnyObject {
    var framing: RequestFraming { get set }
    var body: ByteBuffer? { get set }
}

/// Where a connection's current request stands, and what the handler must do at each event.
///
/// One per connection, driven by ``GatewayHandler``: events go in (a head arrived, the stages
/// finished, a body part, the request's end, the response's end, the client left) and each returns
/// one ``Action`` that the handler performs. The machine decides; it never touches the channel,
/// so its tests drive it without one. States carry their exchange, so an event that arrives for an
/// exchange that is no longer current (a suspended stage resuming after the client left) is
/// recognised and ignored.
///
/// Requests are served one at a time, in order (RFC 9112 §9.3.2): a part the machine cannot take
/// yet (the head of a pipelined request while another is answered) waits in its
/// ``PipelinedRequests`` until the current exchange has ended. It also keeps what the connection's
/// reads and writes depend on (``Flow``: held reads, the read batch's one flush, the credit owed to
/// a backend), as async-http-client's request state machine keeps read demand and writability.
struct ExchangeStateMachine<Exchange: FramedExchange> {
    enum State {
        /// Waiting for a request head.
        case idle
        /// The head's stages are running (one may be suspended); body parts arriving meanwhile are kept.
        case admitting(Exchange)
        /// Admitted; the body is being collected (bodies are handled whole).
        case receivingBody(Exchange)
        /// The handler has the request; its response is awaited or streaming.
        case handling(Exchange)
        /// Answered before the request ended; the rest of a small body is read and dropped.
        case discardingBody(Exchange)
        case closed
    }

    /// How an answer given by the gateway itself (a problem) leaves the connection.
    enum AfterAnswer: Equatable {
        /// The request has ended: the connection waits for the next one.
        case nextRequest
        /// The rest of the request (its end, a small body) is still to come and will be dropped.
        case discardRest
        /// The connection closes once the answer has been written.
        case close
    }

    enum Action {
        case none
        /// A new exchange: run its stages from the first.
        case runStages(Exchange)
        /// The request's end arrived while its stages were still running; nothing else to do yet.
        case requestEnded
        /// Tell the client waiting on `Expect: 100-continue` to send its body.
        case sendContinue(Exchange)
        /// The request is admitted and whole: give it to its handler.
        case handle(Exchange)
        /// Answer with a problem, log, and leave the connection as ``AfterAnswer`` says.
        case answer(Exchange, Problem, AfterAnswer)
        /// The handler's response has ended: log, write the end, and close if `closing`.
        case finishResponse(Exchange, closing: Bool)
        /// A response already under way broke: log and close (a cut body can only be signalled so).
        case abortResponse(Exchange)
        /// The dropped rest of an early-answered request has ended; the next request may come.
        case drainFinished
        /// The client went away mid-exchange: stop the handler's work and log it.
        case abandon(Exchange)
        /// Close now (a dropped body turned out too long to read, or the gateway is shutting down).
        case close
        /// The request could not be parsed: answer with this problem, then close. The exchange whose
        /// request broke off, if one had begun, is logged with that answer.
        case refuse(Problem, Exchange?)
    }

    private var state = State.idle
    /// The gateway is shutting down: the exchange in progress is the connection's last.
    private var quiescing = false
    /// Parts and parse errors of later requests, waiting for the current exchange to end.
    var pipelined = PipelinedRequests()
    var flow = Flow()

    // MARK: Ordering

    /// Whether `part` can be taken now: a head when idle, a body part or end while the current
    /// request is still arriving. Anything else belongs to a later request and must wait.
    func accepts(_ part: HTTPServerRequestPart) -> Bool {
        switch (state, part) {
        case (.idle, .head): true
        case (.admitting(let exchange), .body), (.admitting(let exchange), .end): !exchange.framing.requestEnded
        case (.receivingBody, .body), (.receivingBody, .end), (.discardingBody, .body), (.discardingBody, .end): true
        default: false
        }
    }

    /// Whether a parse error can be answered now: only while no response is under way, since one
    /// cannot interrupt another.
    var acceptsParserError: Bool {
        switch state {
        case .idle, .receivingBody, .discardingBody: true
        // A request that has ended is answered first, even while one of its stages waits.
        case .admitting(let exchange): !exchange.framing.requestEnded
        case .handling, .closed: false
        }
    }

    /// The decoder refused the bytes that follow; call only when ``acceptsParserError``.
    mutating func parserErrorReceived(_ problem: Problem) -> Action {
        switch state {
        case .closed, .handling:
            return .none
        case .discardingBody:
            // The early answer has been written already; nothing can follow it but the close.
            state = .closed
            return .close
        case .idle:
            state = .closed
            return .refuse(problem, nil)
        case .admitting(let exchange), .receivingBody(let exchange):
            state = .closed
            return .refuse(problem, exchange)
        }
    }

    /// The gateway is shutting down: close now if idle, else after the current exchange.
    mutating func quiesce() -> Action {
        quiescing = true
        pipelined.removeAll()
        switch state {
        case .idle:
            state = .closed
            return .close
        case .admitting(let exchange), .receivingBody(let exchange), .handling(let exchange), .discardingBody(let exchange):
            exchange.framing.keepAlive = false
            return .none
        case .closed:
            return .none
        }
    }

    // MARK: Request events

    mutating func headReceived(_ exchange: Exchange) -> Action {
        guard case .idle = state else { return .none }
        state = .admitting(exchange)
        return .runStages(exchange)
    }

    /// The stages of `exchange` have run: `problem` is the answer one of them gave, or nil if all
    /// passed.
    mutating func stagesFinished(_ exchange: Exchange, answer problem: Problem?) -> Action {
        guard case .admitting(let current) = state, current === exchange else { return .none }
        if let problem { return answerEarly(exchange, problem) }
        // RFC 9110 §10.1.1: a client waiting on `Expect: 100-continue` sends its body only when
        // told, and is told only once the request has passed every check that needs no body.
        if let expectation = exchange.framing.expectation, !exchange.framing.requestEnded {
            guard exchange.framing.awaitingContinue else { return answerEarly(exchange, .expectationFailed(expectation)) }
            exchange.framing.awaitingContinue = false
            state = .receivingBody(exchange)
            return .sendContinue(exchange)
        }
        if exchange.framing.requestEnded {
            state = .handling(exchange)
            return .handle(exchange)
        }
        state = .receivingBody(exchange)
        return .none
    }

    mutating func bodyReceived(_ part: ByteBuffer) -> Action {
        switch state {
        case .admitting(let exchange), .receivingBody(let exchange):
            let limit = exchange.framing.maxBodyBytes
            if (exchange.body?.readableBytes ?? 0) + part.readableBytes > limit {
                return answerEarly(exchange, .bodyTooLarge(limit: limit))
            }
            if exchange.body == nil {
                exchange.body = part
            } else {
                var part = part
                exchange.body!.writeBuffer(&part)
            }
            return .none
        case .discardingBody(let exchange):
            exchange.framing.drainedBytes += part.readableBytes
            // A chunked body announces no length: stop reading once it is clearly not small.
            guard exchange.framing.drainedBytes > RequestFraming.maxDrainBytes else { return .none }
            state = .closed
            return .close
        case .idle, .handling, .closed:
            return .none
        }
    }

    mutating func endReceived() -> Action {
        switch state {
        case .admitting(let exchange):
            exchange.framing.requestEnded = true
            return .requestEnded
        case .receivingBody(let exchange):
            exchange.framing.requestEnded = true
            state = .handling(exchange)
            return .handle(exchange)
        case .discardingBody:
            if quiescing {
                state = .closed
                return .close
            }
            state = .idle
            return .drainFinished
        case .idle, .handling, .closed:
            return .none
        }
    }

    // MARK: Response events

    /// The handler answers with a problem of its own (the body's digest did not match, the backend
    /// failed before sending a head).
    mutating func handlerAnswered(_ exchange: Exchange, _ problem: Problem) -> Action {
        guard case .handling(let current) = state, current === exchange else { return .none }
        if problem.closesConnection || !exchange.framing.keepAlive {
            state = .closed
            return .answer(exchange, problem, .close)
        }
        state = .idle
        return .answer(exchange, problem, .nextRequest)
    }

    /// The handler's response head is about to be written: whether the connection closes after
    /// this response. An HTTP/1.0 client can only see the end of a body of unknown length as the
    /// connection's close.
    mutating func responseBegins(_ exchange: Exchange, lengthKnown: Bool) -> Bool {
        if exchange.framing.isHTTP10 && !lengthKnown { exchange.framing.keepAlive = false }
        return !exchange.framing.keepAlive
    }

    mutating func responseEnded(_ exchange: Exchange) -> Action {
        guard case .handling(let current) = state, current === exchange else { return .none }
        flow.unconsumedBytes = 0
        if exchange.framing.keepAlive {
            state = .idle
            return .finishResponse(exchange, closing: false)
        }
        state = .closed
        return .finishResponse(exchange, closing: true)
    }

    mutating func responseFailed(_ exchange: Exchange) -> Action {
        guard case .handling(let current) = state, current === exchange else { return .none }
        flow.unconsumedBytes = 0
        state = .closed
        return .abortResponse(exchange)
    }

    // MARK: Connection events

    mutating func channelInactive() -> Action {
        pipelined.removeAll()
        flow.readHeld = false
        defer { state = .closed }
        switch state {
        // An upload the client gave up on is logged too (499), like an exchange it left mid-answer.
        case .admitting(let exchange), .receivingBody(let exchange), .handling(let exchange): return .abandon(exchange)
        case .idle, .discardingBody, .closed: return .none
        }
    }

    /// Whether `exchange`'s stages are still running: a suspended stage resuming checks this before
    /// it goes on (an exchange answered meanwhile, or whose client left, runs no further stage).
    func isAdmitting(_ exchange: Exchange) -> Bool {
        if case .admitting(let current) = state { return current === exchange }
        return false
    }

    /// Whether `exchange` is the one the connection is serving.
    func isCurrent(_ exchange: Exchange) -> Bool {
        switch state {
        case .admitting(let current), .receivingBody(let current), .handling(let current), .discardingBody(let current):
            current === exchange
        case .idle, .closed:
            false
        }
    }

    /// Whether the connection is closing (or closed): it reads nothing more.
    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    /// The exchange whose response is under way, if any.
    var handlingExchange: Exchange? {
        if case .handling(let exchange) = state { return exchange }
        return nil
    }

    /// Answers while the request's body may still be arriving. The connection stays open only if
    /// what is left of the body can be dropped (``RequestFraming/bodyIsDrainable``).
    private mutating func answerEarly(_ exchange: Exchange, _ problem: Problem) -> Action {
        if problem.closesConnection || !exchange.framing.bodyIsDrainable || !exchange.framing.keepAlive {
            state = .closed
            return .answer(exchange, problem, .close)
        }
        if exchange.framing.requestEnded {
            state = .idle
            return .answer(exchange, problem, .nextRequest)
        }
        state = .discardingBody(exchange)
        return .answer(exchange, problem, .discardRest)
    }
}
