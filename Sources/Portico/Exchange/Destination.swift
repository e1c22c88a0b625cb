import PorticoPolicy

/// What a request is served by, chosen once: the gateway's own answer (by the route stage, for the
/// service locator) or the routed version's handler (by the version stage).
///
/// One enum rather than an optional per kind, so that no exchange can hold a backend and a facade,
/// or a handler without the backend it forwards to.
enum Destination: Sendable {
    /// Forwarded to `backend` as the version's `proxy` says.
    case proxy(ProxyPolicy, CompiledBackend)
    /// Answered from the facade's sources, in its contract.
    case facade(CompiledFacade)
    /// Answered by the Swift handler the policy names.
    case code(CodeHandlerPolicy)
    /// The gateway's own answer (the service locator): no later stage runs, no handler is called.
    case builtIn(BuiltInResponse)

    /// The backend a proxied request draws from and is forwarded to.
    var proxyBackend: CompiledBackend? {
        if case .proxy(_, let backend) = self { return backend }
        return nil
    }
}
