/// What a service allows of connections that stay open: WebSocket upgrades (``ServicePolicy/websocket``)
/// and server-sent event streams.
///
/// A stream holds a client connection, a backend connection and their buffers for as long as it
/// lasts, whatever its request rate: these bound how many a service (and, through its tier, one
/// key) may hold, and for how long, which a rate limit does not.
public struct ServiceStreamLimits: Sendable, Hashable {
    /// Open upgraded connections the service takes at once, across its keys (per gateway).
    public var maxUpgraded: Int?
    /// How long a stream may go without a byte either way before the gateway closes it. For an
    /// event stream it replaces the backend's `timeout` as the longest wait for the next event.
    public var idleTimeout: Duration?
    /// The longest a stream may stay open, busy or not.
    public var maxLifetime: Duration?

    public init(maxUpgraded: Int? = nil, idleTimeout: Duration? = nil, maxLifetime: Duration? = nil) {
        self.maxUpgraded = maxUpgraded
        self.idleTimeout = idleTimeout
        self.maxLifetime = maxLifetime
    }
}
