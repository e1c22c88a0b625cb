import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoUpstream

/// Runs the ``CodeHandler`` a `code` version names, and says how its failures are answered.
///
/// Its fetches are the exchange's task, as a facade's are: a client that goes away cancels those
/// in flight and refuses any it asks for later. They draw from their backends' limits in the
/// gateway's ``LimitStore`` and take their concurrency slots, as a facade's fetches do.
struct CodeHandlerRunner: Sendable {
    let handlers: [String: any CodeHandler]
    let upstream: any UpstreamClient
    let limits: any LimitStore
    let concurrency: BackendConcurrency
    /// Where a handler's failure (an error) and a fetch's (a notice) are logged.
    let logger: Logger

    /// Starts the handler; its answer reaches `responder`. A problem instead when the policy names
    /// a handler the gateway was not given.
    func run(
        _ policy: CodeHandlerPolicy, for exchange: Exchange, on eventLoop: any EventLoop, responder: some ExchangeResponder
    ) -> Problem? {
        guard let handler = handlers[policy.name] else { return .codeHandlerMissing(policy.name) }
        let tasks = FacadeTasks()
        exchange.task = tasks
        let service = exchange.routed?.service.name ?? ""
        let fetcher = SourceFetch(
            upstream: upstream, limits: limits, concurrency: concurrency, service: service, requestID: exchange.requestID, tasks: tasks,
            hashInputs: HashInputs(exchange), trace: exchange.trace)
        let context = CodeHandlerContext(
            eventLoop: eventLoop, backends: policy.backends, fetcher: fetcher, compiled: exchange.policy.backends,
            maxBodyBytes: exchange.snapshot.limits.maxBodyBytes)
        let request = CodeHandlerRequest(
            method: exchange.head.method.wireName, remainder: String(exchange.routed?.remainder ?? ""),
            query: exchange.routed?.query.map(String.init), service: service, version: exchange.version ?? 0,
            requestID: exchange.requestID, body: exchange.body.map { Data($0.readableBytesView) } ?? Data())
        exchange.body = nil
        handler.respond(to: request, context: context).hop(to: eventLoop).assumeIsolated().whenComplete { result in
            switch result {
            case .success(let response) where !WireSyntax.isFieldValue(response.contentType):
                // A type with a line break in it would be a field of the handler's making: its error.
                let error = CodeHandlerError(
                    message: "the response's content type is not a field value: \(response.contentType.debugDescription)")
                responder.handlerAnswered(problem(for: error, policy: policy, exchange: exchange, context: context), for: exchange)
            case .success(let response):
                responder.handlerFinished(exchange, status: response.status, body: response.body, contentType: response.contentType)
            case .failure(let error):
                responder.handlerAnswered(problem(for: error, policy: policy, exchange: exchange, context: context), for: exchange)
            }
        }
        return nil
    }

    /// How a code handler's failure is answered. A backend's limit refusing a fetch is answered
    /// as is (429 or 503, with its `Retry-After`), as a facade answers it; a backend that could
    /// not be reached, timed out or sent a body over the limit as a proxied request's would be
    /// (502 or 504 naming it), logged as a facade's failed source is. Anything else (the handler's
    /// own error, a refused target or backend) is the gateway's 500, logged as an error.
    private func problem(for error: any Error, policy: CodeHandlerPolicy, exchange: Exchange, context: CodeHandlerContext) -> Problem {
        switch error {
        case let refusal as Problem:
            return refusal
        case is FetchCancelled:
            return .stageFailed()  // the client went away; nobody reads this
        case let upstreamError as UpstreamError:
            // An upstream error no fetch failed with is the handler's own, answered below.
            if let backend = context.failedFetches.backend(for: upstreamError) {
                recordFetchFailure(backend: backend, failure: upstreamError.description, policy: policy, exchange: exchange)
                return ProxyHandler.problem(for: upstreamError, backend: backend)
            }
        case is BodyTooLarge:
            // A body over the limit is the backend's invalid answer, as a facade's source takes it;
            // one no fetch met is the handler's own, answered below.
            if let backend = context.failedFetches.oversizedBackend {
                let failure = "the body is over maxBodyBytes (\(context.maxBodyBytes) bytes)"
                recordFetchFailure(backend: backend, failure: failure, policy: policy, exchange: exchange)
                return .badGateway(backend: backend)
            }
        default:
            break
        }
        let message = (error as? CodeHandlerError)?.message ?? String(describing: error)
        logger.error(
            "code handler failed",
            metadata: ["handler": .string(policy.name), "error": .string(message), "request_id": .string(exchange.requestID)])
        return .stageFailed()
    }

    /// Records and logs a code handler's fetch that failed at `backend` (at `notice`: the backend's
    /// failure, not the gateway's).
    private func recordFetchFailure(backend: String, failure: String, policy: CodeHandlerPolicy, exchange: Exchange) {
        exchange.outcome.backend = backend
        exchange.outcome.failure = failure
        logger.notice(
            "code handler fetch failed",
            metadata: [
                "handler": .string(policy.name), "backend": .string(backend), "error": .string(failure),
                "request_id": .string(exchange.requestID),
            ])
    }
}
