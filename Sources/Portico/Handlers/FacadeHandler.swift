import Foundation
import Logging
import NIOCore
import PorticoPolicy
import PorticoReform
import PorticoUpstream

/// What a facade answered: a contract object, or a problem; and which source it came from.
struct FacadeAnswer {
    var body: Data?
    var problem: Problem?
    /// The source that served, or the one that failed last (the access log's `source`).
    var source: String
    var backend: String?
}

/// The `facade` handler: fetches the version's sources, reforms their answers into its contract,
/// falls back from source to source, merges an aggregate, and shadow-compares a candidate.
///
/// Everything happens on the connection's event loop, as futures: the fetches are the upstream
/// client's (non-blocking), and reforming is a bounded amount of pure computation.
struct FacadeHandler: Sendable {
    let upstream: any UpstreamClient
    /// The limits the sources' backends draw from.
    let limits: any LimitStore
    let concurrency: BackendConcurrency
    let metrics: GatewayMetrics?
    let logger: Logger
    /// Identical source fetches in flight, merged across requests.
    var coalescer: FetchCoalescer? = nil

    func serve(_ exchange: Exchange, facade: CompiledFacade, on eventLoop: any EventLoop) -> EventLoopFuture<FacadeAnswer> {
        let remainder = exchange.routed?.remainder ?? ""
        guard let parameters = facade.parameters(remainder: remainder, query: exchange.routed?.query) else {
            return eventLoop.makeSucceededFuture(
                FacadeAnswer(problem: .facadeNoSuchPath(String(exchange.path)), source: facade.chain.first?.name ?? ""))
        }
        let tasks = FacadeTasks()
        exchange.task = tasks
        let fetcher = SourceFetch(
            upstream: upstream, limits: limits, concurrency: concurrency, service: facade.service, requestID: exchange.requestID,
            tasks: tasks, hashInputs: HashInputs(exchange), coalescer: coalescer, trace: exchange.trace)
        if !facade.aggregate.isEmpty {
            return aggregate(facade, parameters: parameters, fetcher: fetcher, on: eventLoop)
        }
        let answer = tryChain(facade, from: 0, last: nil, parameters: parameters, fetcher: fetcher, on: eventLoop)
        if let shadow = facade.shadow {
            // A shadow's fetch is a sample of its own source, never merged with another's.
            var sampling = fetcher
            sampling.coalescer = nil
            compare(shadow, with: answer, facade: facade, parameters: parameters, fetcher: sampling, on: eventLoop)
        }
        return answer.map { served in served.answer }
    }

    private struct Served {
        var answer: FacadeAnswer
        var value: ReformValue?
    }

    /// Tries `facade.chain[index]`, then the next on failure; the last failure becomes the
    /// problem when none is left. A 404 from a source ends the chain: the resource does not
    /// exist, and another source saying so too would not help. So does the client going away:
    /// its cancelled fetch is no source's failure, and no later source is asked (the answer
    /// returned then is never written).
    private func tryChain(
        _ facade: CompiledFacade, from index: Int, last: SourceFailure?, parameters: [String: String], fetcher: SourceFetch,
        on eventLoop: any EventLoop
    ) -> EventLoopFuture<Served> {
        guard index < facade.chain.count else {
            let failure = last ?? SourceFailure(source: "none", kind: .status(0))
            return eventLoop.makeSucceededFuture(
                Served(answer: FacadeAnswer(problem: Self.problem(for: failure), source: failure.source), value: nil))
        }
        let source = facade.chain[index]
        let metrics = metrics
        return fetcher.fetch(source, contract: facade.contract, parameters: parameters, on: eventLoop).map { value in
            metrics?.facades.served(service: facade.service, version: facade.version, source: source.name, byFallback: index > 0)
            return Served(answer: FacadeAnswer(body: value.jsonData, source: source.name, backend: source.policy.backend), value: value)
        }.flatMapError { error in
            let failure = error as? SourceFailure ?? SourceFailure(source: source.name, kind: .status(0))
            if let answer = Self.finalAnswer(for: failure.kind, source: source.name) {
                return eventLoop.makeSucceededFuture(Served(answer: answer, value: nil))
            }
            logger.notice(
                "facade source failed",
                metadata: [
                    "service": .string(facade.service), "version": .stringConvertible(facade.version), "source": .string(source.name),
                    "reason": .string(failure.reason), "request_id": .string(fetcher.requestID),
                ])
            return tryChain(facade, from: index + 1, last: failure, parameters: parameters, fetcher: fetcher, on: eventLoop)
        }
    }

    /// What a request whose client went away ends with; nobody reads it (the exchange is gone).
    private static func cancelled(_ source: String) -> FacadeAnswer {
        FacadeAnswer(problem: .facadeSourceFailed(source: source, field: nil, reason: "the client went away"), source: source)
    }

    /// The answer to a failure no other source would mend, so none is tried: the client went
    /// away, the resource does not exist (404), or the request lacks a parameter or has one that
    /// cannot be a path segment (400). `nil` for a failure a fallback may do better on.
    private static func finalAnswer(for failure: SourceFailure.Kind, source: String) -> FacadeAnswer? {
        switch failure {
        case .cancelled: cancelled(source)
        case .notFound: FacadeAnswer(problem: .facadeNotFound(source: source), source: source)
        case .missingParameter(let name): FacadeAnswer(problem: .facadeParameterMissing(name), source: source)
        case .unusableParameter(let name): FacadeAnswer(problem: .facadeParameterUnusable(name), source: source)
        default: nil
        }
    }

    /// The problem for the source tried last: its rate-limit or concurrency refusal as is (429,
    /// 503), a timeout as 504, anything else 502 naming the source (and the field, if that was it).
    static func problem(for failure: SourceFailure) -> Problem {
        switch failure.kind {
        case .refused(let problem): return problem
        case .unreachable(let error) where error.kind == .timedOut:
            var problem = Problem.gatewayTimeout(backend: failure.source)
            problem.extensions = [("source", failure.source)]
            return problem
        default: return .facadeSourceFailed(source: failure.source, field: failure.field, reason: failure.reason)
        }
    }

    /// Fetches the shadow source beside the chain and compares the two results once both are in.
    /// Nothing waits for it: the client's answer is the chain's future alone. Its fetch draws from
    /// its backend's limits like any other. A client that goes away before its answer is written
    /// cancels the shadow's fetch with the rest; such a shadow is not counted (it did not fail).
    /// Once the answer is written the shadow is on its own, and finishes (or times out) as usual.
    private func compare(
        _ shadow: CompiledFacade.Source, with answer: EventLoopFuture<Served>, facade: CompiledFacade, parameters: [String: String],
        fetcher: SourceFetch, on eventLoop: any EventLoop
    ) {
        let candidate = fetcher.fetch(shadow, contract: facade.contract, parameters: parameters, on: eventLoop)
        let metrics = metrics
        let logger = logger
        answer.and(candidate).whenComplete { result in
            switch result {
            case .success(let (served, shadowValue)):
                guard let activeValue = served.value, served.answer.source != shadow.name else { return }
                if let field = ReformValue.firstDifference(activeValue, shadowValue, contract: facade.contract) {
                    metrics?.shadowCompared(.mismatch, service: facade.service, version: facade.version)
                    logger.warning(
                        "facade shadow mismatch",
                        metadata: [
                            "service": .string(facade.service), "version": .stringConvertible(facade.version),
                            "active": .string(served.answer.source), "shadow": .string(shadow.name), "field": .string(field),
                            "request_id": .string(fetcher.requestID),
                        ])
                } else {
                    metrics?.shadowCompared(.agreement, service: facade.service, version: facade.version)
                }
            case .failure(let error):
                // The chain's future always succeeds (its failures are answers), so the shadow failed.
                if let failure = error as? SourceFailure, case .cancelled = failure.kind { return }
                metrics?.shadowCompared(.shadowFailed, service: facade.service, version: facade.version)
            }
        }
    }

    /// Fetches every part at once and merges what they give. A part that fails is left out: the
    /// answer stands if the parts that succeeded still fill every required field, and is a 502
    /// naming the first unfilled field and the part that should have filled it otherwise. Parts
    /// have no fallbacks of their own; a 404 from any part is the answer.
    private func aggregate(
        _ facade: CompiledFacade, parameters: [String: String], fetcher: SourceFetch, on eventLoop: any EventLoop
    ) -> EventLoopFuture<FacadeAnswer> {
        let parts = facade.aggregate.map {
            fetcher.fetch($0, contract: facade.contract, parameters: parameters, partial: true, on: eventLoop)
        }
        let names = facade.aggregate.map(\.name).joined(separator: "+")
        return EventLoopFuture.whenAllComplete(parts, on: eventLoop).map { results in
            var values: [ReformValue] = []
            var failures: [SourceFailure] = []
            for (source, result) in zip(facade.aggregate, results) {
                switch result {
                case .success(let value): values.append(value)
                case .failure(let error):
                    let failure = error as? SourceFailure ?? SourceFailure(source: source.name, kind: .status(0))
                    if case .cancelled = failure.kind { return Self.cancelled(source.name) }
                    if case .notFound = failure.kind {
                        return FacadeAnswer(problem: .facadeNotFound(source: source.name), source: source.name)
                    }
                    failures.append(failure)
                }
            }
            let merged = ReformValue.merge(values, contract: facade.contract)
            if let field = ReformValue.missingRequired(in: merged, contract: facade.contract) {
                let culprit =
                    failures.first { failure in
                        facade.sources[failure.source]?.policy.fields.contains { $0.field == field } ?? false
                    } ?? failures.first ?? SourceFailure(source: names, kind: .reform(ReformError(.missingField(field))))
                let problem = Problem.facadeSourceFailed(source: culprit.source, field: field, reason: culprit.reason)
                return FacadeAnswer(problem: problem, source: culprit.source)
            }
            return FacadeAnswer(body: merged.jsonData, source: names)
        }
    }
}
