/// Why a command got no reply from Redis. Each is a reason to fall back to the policy's
/// `onFailure` behaviour; none is retried by the client itself.
public struct RedisError: Error, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        case timeout
        case unavailable
        case connectionClosed
        case protocolViolation(String)
        case circuitOpen
    }

    let kind: Kind

    /// No reply within the command's timeout.
    public static let timeout = Self(kind: .timeout)
    /// No connection, and the reconnect backoff has not yet elapsed (or connecting failed).
    public static let unavailable = Self(kind: .unavailable)
    /// The connection closed before the reply came.
    public static let connectionClosed = Self(kind: .connectionClosed)
    /// The server's bytes were not RESP2; the connection was closed.
    public static func protocolViolation(_ detail: String) -> Self { Self(kind: .protocolViolation(detail)) }
    /// The circuit breaker is open: Redis failed recently, so it is not asked.
    public static let circuitOpen = Self(kind: .circuitOpen)

    /// A label for the errors metric.
    public var label: String {
        switch kind {
        case .timeout: "timeout"
        case .unavailable: "unavailable"
        case .connectionClosed: "connection_closed"
        case .protocolViolation: "protocol"
        case .circuitOpen: "circuit_open"
        }
    }

    public var description: String {
        switch kind {
        case .protocolViolation(let detail): "Redis protocol violation: \(detail)"
        default: "Redis \(label.split(separator: "_").joined(separator: " "))"
        }
    }
}
