import PorticoPolicy

/// What a request is served by, chosen once: the gateway's own answer (by the route stage, for the
/// service locator) or the routed version's handler (by the version stage).
///
/// One enum rather than an optional per kind, so that no exchange can hold a backend and a facade,
/// or a handler without the backend it forwards to.
enum Destination: Sendable {
    /// Forwarded to its backend as the version's `proxy` says.
    case proxy(CompiledProxy)
    /// Answered from the facade's sources, in its contract.
    case facade(CompiledFacade)
    /// Answered by the Swift handler the policy names.
    case code(CodeHandlerPolicy)
    /// The gateway's own answer (the service locator): no later stage runs, no handler is called.
    case builtIn(BuiltInResponse)

    /// The backend a proxied request draws from and is forwarded to.
    var proxyBackend: CompiledBackend? {
        if case .proxy(let proxy) = self { return proxy.backend }
        return nil
    }
}

/// A version's proxy, compiled: its policy and the backend it names, in one object made when the
/// policy loads. An exchange's destination is then one reference: the stages, the handler and the
/// metrics each read it, and each read of a policy and a backend side by side copied the policy's
/// strings and the backend, a reference count each way for each.
final class CompiledProxy: Sendable {
    let policy: ProxyPolicy
    let backend: CompiledBackend

    init(_ policy: ProxyPolicy, backend: CompiledBackend) {
        self.policy = policy
        self.backend = backend
    }
}
