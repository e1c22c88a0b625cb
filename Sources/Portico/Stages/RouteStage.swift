import NIOCore
import PorticoPolicy

/// The route stage: which service a request is for (``Route``), or a 404 or 400 problem.
///
/// The service locator's two paths (``CompiledLocator``) are answered by the gateway itself: the
/// exchange's destination is a built-in response, and no later stage runs for it
/// (``RequestStages``).
struct RouteStage: RequestStage {
    /// The listener's policy name, which picks the locator's public base URL.
    var listener: String = ""

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        if let locator = exchange.policy.locator,
            let answer = locator.answer(exchange.head, listener: listener)
        {
            exchange.route = .locator
            switch answer {
            case .success(let response):
                exchange.destination = .builtIn(response)
                return .proceed
            case .failure(let problem):
                return .answer(problem)
            }
        }
        switch Route.resolve(exchange.head, in: exchange.policy) {
        case .failure(let problem):
            return .answer(problem)
        case .success(let routed):
            exchange.route = .service(routed)
            return .proceed
        }
    }
}
