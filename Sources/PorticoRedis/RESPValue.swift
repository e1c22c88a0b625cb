import NIOCore

/// One value of the Redis serialization protocol, version 2 (RESP2): what a command is sent as
/// (an array of bulk strings) and what every reply is.
///
/// The client never sends `HELLO 3`, so a server only answers in RESP2's five types; a RESP3 type
/// byte on the wire is refused as malformed (``RESPDecodingError``).
/// See <https://redis.io/docs/latest/develop/reference/protocol-spec/>.
public enum RESPValue: Sendable, Equatable {
    /// `+OK\r\n`
    case simpleString(String)
    /// `-ERR message\r\n`: a reply, not a failure of the connection; the caller decides.
    case error(String)
    /// `:42\r\n`
    case integer(Int64)
    /// `$3\r\nfoo\r\n`; `nil` for the null bulk string `$-1\r\n`.
    case bulkString(ByteBuffer?)
    /// `*2\r\n…`; `nil` for the null array `*-1\r\n`.
    case array([RESPValue]?)

    /// A command: its name and arguments as bulk strings. (The request path writes its command
    /// straight into bytes instead: ``RESPValueEncoder/command(_:)``.)
    public static func command(_ parts: [String]) -> RESPValue {
        .array(parts.map { .bulkString(ByteBuffer(string: $0)) })
    }

    /// The value as text, for simple and bulk strings.
    public var string: String? {
        switch self {
        case .simpleString(let text): text
        case .bulkString(let buffer?): String(buffer: buffer)
        default: nil
        }
    }

    public var integer: Int64? {
        if case .integer(let value) = self { value } else { nil }
    }

    public var array: [RESPValue]? {
        if case .array(let values?) = self { values } else { nil }
    }

    /// Whether this is the null bulk string or null array.
    public var isNull: Bool {
        switch self {
        case .bulkString(nil), .array(nil): true
        default: false
        }
    }
}
