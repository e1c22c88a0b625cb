/// Why a command got no usable reply from Redis. Each is a reason to fall back to the policy's
/// `onFailure` behaviour and counts as a failure for the circuit breaker; none is retried by the
/// client itself.
public struct RedisError: Error, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        case timeout
        case unavailable
        case connectionClosed
        case protocolViolation(String)
        case circuitOpen
        case errorReply(String)
        case tls(String)
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
    /// Redis answered with an error reply (`-READONLY …` after a failover, `-LOADING …`,
    /// `-MASTERDOWN …`, `-NOSCRIPT …`, `-OOM …`): an answer, so the connection stays in step, but
    /// not one the command can use. `message` is Redis's line, without the leading `-`.
    public static func errorReply(_ message: String) -> Self { Self(kind: .errorReply(message)) }

    /// TLS to Redis failed: its certificate did not verify or name the host, no shared version,
    /// a broken record. `detail` is OpenSSL's reason.
    public static func tls(_ detail: String) -> Self { Self(kind: .tls(detail)) }

    /// The error reply's code (its first word, e.g. `READONLY`), for an ``errorReply(_:)``.
    public var errorCode: Substring? {
        guard case .errorReply(let message) = kind else { return nil }
        return message.split(separator: " ", maxSplits: 1).first ?? ""
    }

    /// A label for the errors metric.
    public var label: String {
        switch kind {
        case .timeout: "timeout"
        case .unavailable: "unavailable"
        case .connectionClosed: "connection_closed"
        case .protocolViolation: "protocol"
        case .circuitOpen: "circuit_open"
        case .errorReply: "error_reply"
        case .tls: "tls"
        }
    }

    public var description: String {
        switch kind {
        case .protocolViolation(let detail): "Redis protocol violation: \(detail)"
        case .errorReply(let message): "Redis answered an error: \(message)"
        case .tls(let detail): "TLS to Redis failed: \(detail)"
        default: "Redis \(label.split(separator: "_").joined(separator: " "))"
        }
    }
}
