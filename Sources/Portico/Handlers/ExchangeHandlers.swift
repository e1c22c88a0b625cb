import NIOCore
import NIOHTTP1
import PorticoPolicy

/// Starts what an admitted request's ``Destination`` names: the gateway's own answer, the proxy,
/// the facade or the code handler. Adding a kind of handler is a case of ``Destination``, a file
/// in `Handlers/`, and a line here.
struct ExchangeHandlers: Sendable {
    let proxy: ProxyHandler
    let facade: FacadeHandler
    let code: CodeHandlerRunner

    init(services: GatewayServices) {
        let concurrency = services.rateLimiter.concurrency
        proxy = ProxyHandler(upstream: services.upstream, concurrency: concurrency, scheme: services.scheme, logger: services.logger)
        facade = FacadeHandler(
            upstream: services.upstream, limits: services.limits, concurrency: concurrency, metrics: services.metrics,
            logger: services.logger)
        code = CodeHandlerRunner(
            handlers: services.codeHandlers, upstream: services.upstream, limits: services.limits, concurrency: concurrency,
            logger: services.logger)
    }

    /// Starts serving `exchange` on `eventLoop`, the connection's; its answer reaches `responder`
    /// there. A problem instead when it cannot start.
    func start(_ exchange: Exchange, on eventLoop: any EventLoop, responder: some ExchangeResponder) -> Problem? {
        switch exchange.destination {
        case .builtIn(let response):
            responder.handlerFinished(
                exchange, status: Int(response.status.code), headers: response.headers, body: response.body,
                contentLength: response.contentLength)
            return nil
        case .proxy(let policy, let backend):
            return proxy.start(exchange, proxy: policy, backend: backend, on: eventLoop, responder: responder)
        case .facade(let compiled):
            // A facade reads; what another method would mean to its sources is not for it to guess.
            guard exchange.head.method == .GET || exchange.head.method == .HEAD else { return .methodNotAllowed(allowed: "GET, HEAD") }
            serve(exchange, facade: compiled, on: eventLoop, responder: responder)
            return nil
        case .code(let policy):
            return code.run(policy, for: exchange, on: eventLoop, responder: responder)
        case nil:
            // The stages always choose one; answer rather than hang.
            return .badGateway(backend: "unknown")
        }
    }

    private func serve(
        _ exchange: Exchange, facade compiled: CompiledFacade, on eventLoop: any EventLoop, responder: some ExchangeResponder
    ) {
        let started = NIODeadline.now()
        facade.serve(exchange, facade: compiled, on: eventLoop).assumeIsolated().whenComplete { result in
            let answer = (try? result.get()) ?? FacadeAnswer(problem: .stageFailed(), source: compiled.chain.first?.name ?? "")
            exchange.outcome.source = answer.source
            exchange.outcome.backend = answer.backend
            exchange.outcome.upstreamDuration = .nanoseconds((NIODeadline.now() - started).nanoseconds)
            if let body = answer.body, answer.problem == nil {
                responder.handlerFinished(exchange, status: 200, body: body, contentType: "application/json")
            } else {
                responder.handlerAnswered(answer.problem ?? .stageFailed(), for: exchange)
            }
        }
    }
}
