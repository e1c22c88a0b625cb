import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

/// Starts what an admitted request's ``Destination`` names: the gateway's own answer, the proxy,
/// the facade or the code handler, with the response cache in front of the proxy and the facade
/// as the cache stage decided (``ExchangeCache``). Adding a kind of handler is a case of
/// ``Destination``, a file in `Handlers/`, and a line here.
///
/// One per listener (``ConnectionPipeline``), shared by all its connections' ``GatewayHandler``s:
/// everything it holds comes from the gateway's services, and held inline by each handler it would
/// cost every idle connection a few hundred bytes (its loggers and existentials) and every accepted
/// one their copies.
final class ExchangeHandlers: Sendable {
    let proxy: ProxyHandler
    let facade: FacadeHandler
    let code: CodeHandlerRunner
    let cache: ResponseCache
    let webSocket: WebSocketProxy
    /// What a background refresh draws its backend's limit from.
    let limits: any LimitStore

    init(services: GatewayServices) {
        let concurrency = services.rateLimiter.concurrency
        proxy = ProxyHandler(upstream: services.upstream, concurrency: concurrency, scheme: services.scheme, logger: services.logger)
        facade = FacadeHandler(
            upstream: services.upstream, limits: services.limits, concurrency: concurrency, metrics: services.metrics,
            logger: services.logger, coalescer: services.sourceFetches)
        code = CodeHandlerRunner(
            handlers: services.codeHandlers, upstream: services.upstream, limits: services.limits, concurrency: concurrency,
            logger: services.logger)
        cache = services.cache
        limits = services.limits
        webSocket = WebSocketProxy(streams: services.streams, tls: services.upgradeTLS, scheme: services.scheme, metrics: services.metrics)
    }

    /// Starts serving `exchange` on `eventLoop`, the connection's; its answer reaches `responder`
    /// there. A problem instead when it cannot start.
    ///
    /// The order on the way back: handler → cache (which keeps the response as the backend sent
    /// it) → compression → the connection's handler. A stored response is compressed by
    /// ``CachedAnswer`` itself, once per coding.
    func start(_ exchange: Exchange, on eventLoop: any EventLoop, responder connection: some ExchangeResponder) -> Problem? {
        // An HTTP/2 extended CONNECT: a WebSocket to a proxied service that takes them, or nothing.
        if let tunnel = exchange.tunnelProtocol {
            guard tunnel.lowercased() == "websocket", case .proxy(let compiled) = exchange.destination,
                exchange.routed?.service.policy.websocket == true, let upgrading = connection as? any UpgradeResponder
            else { return .tunnelNotOffered(tunnel, service: exchange.routed?.service.name) }
            return webSocket.start(exchange, proxy: compiled.policy, backend: compiled.backend, on: eventLoop, responder: upgrading)
        }
        // A WebSocket handshake to a service that takes them: no cache, no compression, its own path.
        if exchange.framing.switchesProtocols, case .proxy(let compiled) = exchange.destination,
            exchange.routed?.service.policy.websocket == true, WebSocketHandshake.isRequested(exchange.head),
            let upgrading = connection as? any UpgradeResponder
        {
            return webSocket.start(exchange, proxy: compiled.policy, backend: compiled.backend, on: eventLoop, responder: upgrading)
        }
        // What a handler's answer goes through on its way out (a hit is compressed by CachedAnswer,
        // so it needs none): made only on the paths that run a handler.
        func outward() -> any ExchangeResponder {
            guard let rules = exchange.routed?.rules.compression, exchange.head.method != .HEAD else { return connection }
            return ResponseCompression(inner: connection, rules: rules, coding: rules.negotiate(exchange.head.headers))
        }
        switch exchange.cache {
        case .hit(let entry, let usability, let refresh, let request, let collapsed):
            let status: String
            switch usability {
            case .staleWhileRevalidate:
                status = CacheStatus.staleWhileRevalidate
                cache.metrics?.count(.staleWhileRevalidate)
            default:
                status = CacheStatus.hit(collapsed: collapsed, stale: usability == .staleAllowed)
                cache.metrics?.count(collapsed ? .collapsed : .hit)
            }
            CachedAnswer.serve(entry, to: exchange, responder: connection, status: status, cache: cache)
            if let refresh { refreshInBackground(exchange, fill: refresh, stale: entry, request: request, on: eventLoop) }
            return nil
        case .fetch(let fill, let stale, let request):
            guard let rules = exchange.cacheRules else { break }
            let filling = CacheFilling(
                inner: outward(), cache: cache, fill: fill, stale: stale, request: request, rules: rules,
                limits: exchange.snapshot.policy.cache ?? CachePolicy(), on: eventLoop)
            if let problem = handle(exchange, on: eventLoop, responder: filling) { filling.handlerAnswered(problem, for: exchange) }
            return nil
        case .bypass:
            exchange.cacheStatus = CacheStatus.bypass
        case .invalidate(let key):
            return handle(
                exchange, on: eventLoop, responder: CacheInvalidation(inner: outward(), cache: cache, key: key, on: eventLoop))
        case nil:
            break
        }
        return handle(exchange, on: eventLoop, responder: outward())
    }

    /// Starts the destination's handler.
    private func handle(_ exchange: Exchange, on eventLoop: any EventLoop, responder: any ExchangeResponder) -> Problem? {
        switch exchange.destination {
        case .builtIn(let response):
            responder.handlerFinished(
                exchange, status: Int(response.status.code), headers: response.headers, body: response.body,
                contentLength: response.contentLength)
            return nil
        case .proxy(let compiled):
            return proxy.start(exchange, proxy: compiled.policy, backend: compiled.backend, on: eventLoop, responder: responder)
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
        _ exchange: Exchange, facade compiled: CompiledFacade, on eventLoop: any EventLoop, responder: any ExchangeResponder
    ) {
        let started = NIODeadline.now()
        facade.serve(exchange, facade: compiled, on: eventLoop).assumeIsolated().whenComplete { result in
            let answer = (try? result.get()) ?? FacadeAnswer(problem: .stageFailed(), source: compiled.chain.first?.name ?? "")
            exchange.outcome.source = answer.source
            exchange.outcome.backend = answer.backend
            exchange.outcome.upstreamDuration = .nanoseconds((NIODeadline.now() - started).nanoseconds)
            if let body = answer.body, answer.problem == nil {
                if let filling = responder as? CacheFilling {
                    filling.facadeAnswered(body, for: exchange)
                } else {
                    responder.handlerFinished(exchange, status: 200, body: body, contentType: "application/json")
                }
            } else {
                responder.handlerAnswered(answer.problem ?? .stageFailed(), for: exchange)
            }
        }
    }

    /// Starts the one refresh of a response served within its `stale-while-revalidate`, on an
    /// exchange of its own that no client waits for: what it brings back is stored, and nothing
    /// is written anywhere. It draws from the backend's limit and concurrency like any request
    /// to it; refused, it is given up (the stale response keeps serving within its window).
    private func refreshInBackground(
        _ exchange: Exchange, fill: CacheFill, stale: CachedResponse, request: CacheRequest, on eventLoop: any EventLoop
    ) {
        guard exchange.cacheRules != nil else { return fill.abandon() }
        guard let backend = exchange.destination?.proxyBackend, let draw = RateLimiter.draw(backend: backend),
            let service = exchange.routed?.rules.name
        else { return startRefresh(exchange, fill: fill, stale: stale, request: request, on: eventLoop) }
        switch limits.admit(LimitRequest(service: service, backend: draw), on: eventLoop) {
        case .decided(.admitted): startRefresh(exchange, fill: fill, stale: stale, request: request, on: eventLoop)
        case .decided(.refused): fill.abandon()
        case .pending(let outcome):
            outcome.assumeIsolated().whenSuccess { outcome in
                guard case .admitted = outcome else { return fill.abandon() }
                self.startRefresh(exchange, fill: fill, stale: stale, request: request, on: eventLoop)
            }
        }
    }

    private func startRefresh(
        _ exchange: Exchange, fill: CacheFill, stale: CachedResponse, request: CacheRequest, on eventLoop: any EventLoop
    ) {
        guard let rules = exchange.cacheRules else { return fill.abandon() }
        let refresh = exchange.detachedCopy()
        refresh.cache = .fetch(fill, stale: stale, request: request)
        let filling = CacheFilling(
            inner: BackgroundSink(), cache: cache, fill: fill, stale: stale, request: request, rules: rules,
            limits: exchange.snapshot.policy.cache ?? CachePolicy(), on: eventLoop, background: true)
        if let problem = handle(refresh, on: eventLoop, responder: filling) { filling.handlerAnswered(problem, for: refresh) }
    }
}

/// Where a background refresh's answer goes: nowhere. Body bytes are acknowledged as they come,
/// so that the backend's response is read to its end, and the exchange's slot is given back.
private final class BackgroundSink: ExchangeResponder {
    func handlerReceived(_ events: UpstreamEvents, for exchange: Exchange) {
        if let result = events.result {
            _ = exchange.handlerEnded(result)
        } else if let body = events.body {
            exchange.task?.consumed(bytes: body.readableBytes)
        }
    }

    func handlerAnswered(_ problem: Problem, for exchange: Exchange) {
        exchange.releaseConcurrencySlot()
    }
}
