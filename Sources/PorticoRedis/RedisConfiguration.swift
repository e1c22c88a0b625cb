import PorticoTLS

/// TLS to Redis (`rediss://`): the trusted CAs, and the name the server's certificate must carry.
public struct RedisTLS: Sendable {
    public var context: TLSClientContext
    /// Sent as SNI and checked against the certificate (a DNS name or an IP address); the host
    /// connected to, unless set otherwise.
    public var serverName: String

    public init(context: TLSClientContext, serverName: String) {
        self.context = context
        self.serverName = serverName
    }
}

/// Where Redis is and how to talk to it.
///
/// Its description, debug description and reflection (`dump`, `Mirror`, string interpolation of
/// the value) never show the password: a configuration may be logged whole.
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
    /// TLS on every connection (`rediss://`); `nil` for plain TCP.
    public var tls: RedisTLS?
    /// The longest bulk string a reply may hold (a shared cache entry is one); twice this may wait
    /// in the decoder. A reply over it breaks the connection rather than growing its buffer.
    public var maxReplyBytes: Int = 1024 * 1024

    public init(
        host: String, port: Int, password: String? = nil, database: Int = 0, timeoutNanos: Int64 = 50_000_000,
        scripts: [String] = [], breakerFailures: Int = 5, breakerOpenNanos: Int64 = 1_000_000_000, tls: RedisTLS? = nil
    ) {
        self.tls = tls
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

extension RedisConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        let host = host.contains(":") ? "[\(host)]" : host
        return "\(tls == nil ? "redis" : "rediss")://\(host):\(port) (database \(database), password \(password == nil ? "none" : "set"), "
            + "timeout \(timeoutNanos / 1_000_000) ms, \(scripts.count) script(s))"
    }

    public var debugDescription: String { "RedisConfiguration(\(description))" }

    /// The fields, with the password as `set` or `none`.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "host": host, "port": port, "password": password == nil ? "none" : "set", "database": database,
                "timeoutNanos": timeoutNanos, "scripts": scripts.count, "breakerFailures": breakerFailures,
                "breakerOpenNanos": breakerOpenNanos,
                "tls": tls.map { "server name \($0.serverName), CA file \($0.context.caFile ?? "system")" } ?? "none",
            ], displayStyle: .struct)
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
    /// A loop's connection was made (its handshake is written but not yet answered).
    func connected()
    /// A loop's connection was closed by the client because of `reason` (a timeout, a server
    /// that is now a replica); the next command reconnects once the backoff allows.
    func disconnected(_ reason: RedisError)
}

extension RedisObserver {
    public func connected() {}
    public func disconnected(_ reason: RedisError) {}
}
