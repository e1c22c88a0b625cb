import NIOCore
import PorticoPolicy

/// The route stage: which service a request is for (``Route``), or a 404 or 400 problem.
///
/// The service locator's two paths (``CompiledLocator``) are answered by the gateway itself: the
/// exchange gets a built-in response, and the stages after this one, which act on a routed
/// service, let it through.
struct RouteStage: RequestStage {
    /// The listener's policy name, which picks the locator's public base URL.
    var listener: String = ""

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        if let locator = exchange.policy.locator,
            let answer = locator.answer(exchange.head, listener: listener)
        {
            exchange.record.service = "(locator)"
            switch answer {
            case .success(let response):
                exchange.builtIn = response
                return .proceed
            case .failure(let problem):
                return .answer(problem)
            }
        }
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
