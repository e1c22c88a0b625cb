import NIOCore
import Tracing

/// Where a run of the stages reports: the connection's handler.
protocol StageRunDelegate: AnyObject {
    /// Whether `exchange` is still waiting on its stages: a suspended stage resuming checks this
    /// before it goes on (an exchange answered meanwhile, or whose client left, runs no further stage).
    func isAdmitting(_ exchange: Exchange) -> Bool
    /// The stages of `exchange` have run: `problem` is the answer one of them gave, or nil if all passed.
    func stagesFinished(_ exchange: Exchange, answer problem: Problem?)
    /// Calls `resume` on the event loop once `exchange`'s request has ended (at once if it has),
    /// unless the exchange stops admitting first; a client waiting on `100 Continue` is told to go on.
    func whenRequestEnds(_ exchange: Exchange, resume: @escaping () -> Void)
}

extension RequestStages {
    /// Runs the stages from `index` on, over `exchange`, on the connection's event loop. A
    /// suspended stage resumes the run when its future completes (a failed one is the gateway's
    /// 500). An exchange whose destination is the gateway's own answer (the service locator) runs
    /// no stage after the one that chose it.
    func run(_ exchange: Exchange, from index: Int = 0, on eventLoop: any EventLoop, reportingTo delegate: some StageRunDelegate) {
        var index = index
        while index < stages.count {
            let span = exchange.trace.flatMap { trace in stages[index].spanName(for: exchange).flatMap { trace.child($0, kind: .internal) }
            }
            if let span { exchange.trace?.stage = span }
            let outcome = stages[index].process(exchange, on: eventLoop)
            if span != nil { exchange.trace?.stage = nil }
            index += 1
            switch outcome {
            case .proceed:
                span?.end()
                if case .builtIn = exchange.destination { index = stages.count }
            case .answer(let problem):
                span?.record(problem)
                span?.end()
                return delegate.stagesFinished(exchange, answer: problem)
            case .suspend(let future):
                // The span covers the wait too (a Redis round trip, a key set's load).
                span?.attributes["portico.stage.suspended"] = true
                return resume(exchange, after: future, at: index, span: span, on: eventLoop, reportingTo: delegate)
            case .awaitBody:
                // The stage runs again once the body is in: that run gets a span of its own.
                span?.end()
                return awaitBody(exchange, rerunning: index - 1, on: eventLoop, reportingTo: delegate)
            }
        }
        delegate.stagesFinished(exchange, answer: nil)
    }

    private func awaitBody(
        _ exchange: Exchange, rerunning index: Int, on eventLoop: any EventLoop, reportingTo delegate: some StageRunDelegate
    ) {
        delegate.whenRequestEnds(exchange) { [delegate] in
            guard delegate.isAdmitting(exchange) else { return }
            run(exchange, from: index, on: eventLoop, reportingTo: delegate)
        }
    }

    private func resume(
        _ exchange: Exchange, after future: EventLoopFuture<StageOutcome>, at index: Int, span: (any Span)? = nil,
        on eventLoop: any EventLoop, reportingTo delegate: some StageRunDelegate
    ) {
        future.hop(to: eventLoop).assumeIsolated().whenComplete { result in
            // The client may have left, or the exchange been answered, while the stage waited.
            guard delegate.isAdmitting(exchange) else {
                span?.attributes["portico.stage.abandoned"] = true
                span?.end()
                return
            }
            switch result {
            case .success(.proceed):
                span?.end()
                run(exchange, from: index, on: eventLoop, reportingTo: delegate)
            case .success(.answer(let problem)):
                span?.record(problem)
                span?.end()
                delegate.stagesFinished(exchange, answer: problem)
            case .success(.suspend(let next)):
                resume(exchange, after: next, at: index, span: span, on: eventLoop, reportingTo: delegate)
            case .success(.awaitBody):
                span?.end()
                awaitBody(exchange, rerunning: index - 1, on: eventLoop, reportingTo: delegate)
            case .failure:
                let problem = Problem.stageFailed()
                span?.record(problem)
                span?.end()
                delegate.stagesFinished(exchange, answer: problem)
            }
        }
    }
}
