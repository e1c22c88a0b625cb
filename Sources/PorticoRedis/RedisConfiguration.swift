/// Where Redis is and how to talk to it.
public struct RedisConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var password: String?
    /// `SELECT`ed on connect when not 0.
    public var database: Int
    /// Longest wait for a reply, and for a connection.
    public var timeoutNanos: Int64
    /// Scripts loaded (`SCRIPT LOAD`) on every new connection, before any command, so that
    /// `EVALSHA` finds them even on a Redis that restarted empty.
    public var scripts: [String]
    public var breakerFailures: Int
    public var breakerOpenNanos: Int64

    public init(
        host: String, port: Int, password: String? = nil, database: Int = 0, timeoutNanos: Int64 = 50_000_000,
        scripts: [String] = [], breakerFailures: Int = 5, breakerOpenNanos: Int64 = 1_000_000_000
    ) {
        self.host = host
        self.port = port
        self.password = password
        self.database = database
        self.timeoutNanos = timeoutNanos
        self.scripts = scripts
        self.breakerFailures = breakerFailures
        self.breakerOpenNanos = breakerOpenNanos
    }

    /// The commands sent first on every connection: `AUTH`, `SELECT`, `SCRIPT LOAD`.
    var handshake: [RESPValue] {
        var commands: [RESPValue] = []
        if let password { commands.append(.command(["AUTH", password])) }
        if database != 0 { commands.append(.command(["SELECT", String(database)])) }
        for script in scripts { commands.append(.command(["SCRIPT", "LOAD", script])) }
        return commands
    }
}

/// What the client reports, for metrics. Called on the event loop of the command.
public protocol RedisObserver: Sendable {
    /// A reply came after `nanos`.
    func replied(afterNanos nanos: Int64)
    /// A command failed.
    func failed(_ error: RedisError)
    /// A loop's breaker changed state.
    func breakerChanged(from old: CircuitBreaker.State, to new: CircuitBreaker.State)
}
