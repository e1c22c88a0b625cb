import NIOCore
import PorticoPolicy

/// The route stage: which service a request is for (``Route``), or a 404 or 400 problem.
struct RouteStage: RequestStage {
    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        switch Route.resolve(exchange.head, in: exchange.policy) {
        case .failure(let problem):
            return .answer(problem)
        case .success(let routed):
            exchange.routed = routed
            exchange.record.service = routed.service.name
            return .proceed
        }
    }
}
