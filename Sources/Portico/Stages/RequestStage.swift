import NIOCore
import PorticoPolicy

/// One step a request passes through between its head and its handler.
///
/// Stages run in the order of ``RequestStages/standard``, each on the connection's event loop, over
/// the ``Exchange`` that earlier stages have filled in. A stage either lets the request go on,
/// answers it (a problem, which ends the exchange), or suspends: it returns a future of its outcome
/// (a Redis round trip, say) and the next stage runs when that future completes. A suspended stage
/// never blocks the event loop, and the connection keeps reading the body meanwhile.
protocol RequestStage: Sendable {
    /// Called on `eventLoop`, the connection's; a suspension's future must complete there too.
    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome
    /// The name of the span a sampled request gets for this stage; nil for a stage with nothing
    /// to show for it (routing, the head's checks, a cache stage on a service that does not cache).
    func spanName(for exchange: Exchange) -> String?
}

extension RequestStage {
    func spanName(for exchange: Exchange) -> String? { nil }
}

enum StageOutcome {
    /// On to the next stage.
    case proceed
    /// The request is answered with this problem; no later stage runs.
    case answer(Problem)
    /// Waiting on something; the outcome arrives on the connection's event loop.
    case suspend(EventLoopFuture<StageOutcome>)
    /// The stage needs the whole body (a SigV4 signature over the body's hash): it runs again
    /// once the request has ended. The body keeps arriving meanwhile, within `maxBodyBytes`, and a
    /// client waiting on `100 Continue` is told to send it.
    case awaitBody
}

/// The stages every request passes through, in order. Adding a stage is a file and a line here.
struct RequestStages: Sendable {
    let stages: [any RequestStage]

    /// head checks → route → the service's address lists → CORS (a preflight is answered here)
    /// → authenticate → the key's address lists → resolve version → rate-limit → cache; the
    /// handler, response decoration and access log follow once the request is admitted.
    static func standard(_ services: GatewayServices) -> RequestStages {
        RequestStages(stages: [
            HeadChecksStage(),
            RouteStage(listener: services.listener),
            AddressListStage(scope: .service),
            CORSStage(),
            AuthenticationStage(
                nonces: services.nonces, scheme: services.scheme, rateLimiter: services.rateLimiter, keySets: services.jwtKeys,
                metrics: services.metrics),
            AddressListStage(scope: .key),
            VersionStage(),
            RateLimitStage(limits: services.limits),
            CacheStage(cache: services.cache, limits: services.limits),
        ])
    }
}
