/// Why bytes from the server are not RESP2. The connection that received them cannot be trusted
/// to stay in step with its commands afterwards, so it is closed and every command waiting on it
/// fails (``RedisError/protocolViolation(_:)``).
public struct RESPDecodingError: Error, Hashable, CustomStringConvertible {
    private enum Kind: Hashable {
        case unknownType(UInt8)
        case badInteger(String)
        case badLength(Int64)
        case missingCRLF
        case lineTooLong(Int)
        case tooLarge(Int64, limit: Int)
        case tooDeep(Int)
        case tooMuchBuffered(Int, limit: Int)
    }

    private let kind: Kind

    /// A first byte that is not one of `+ - : $ *`.
    public static func unknownType(_ byte: UInt8) -> Self { Self(kind: .unknownType(byte)) }
    /// An integer, or a length, that is not a decimal number.
    public static func badInteger(_ text: String) -> Self { Self(kind: .badInteger(text)) }
    /// A length below −1.
    public static func badLength(_ length: Int64) -> Self { Self(kind: .badLength(length)) }
    /// A bulk string not followed by CR LF.
    public static let missingCRLF = Self(kind: .missingCRLF)
    /// A line (simple string, error, integer, header) longer than the limit without its CR LF.
    public static func lineTooLong(limit: Int) -> Self { Self(kind: .lineTooLong(limit)) }
    /// A bulk string or array larger than the decoder accepts.
    public static func tooLarge(_ length: Int64, limit: Int) -> Self { Self(kind: .tooLarge(length, limit: limit)) }
    /// Arrays nested deeper than the decoder accepts.
    public static func tooDeep(limit: Int) -> Self { Self(kind: .tooDeep(limit)) }
    /// An incomplete reply holding more bytes than the decoder buffers.
    public static func tooMuchBuffered(_ bytes: Int, limit: Int) -> Self { Self(kind: .tooMuchBuffered(bytes, limit: limit)) }

    public var description: String {
        switch kind {
        case .unknownType(let byte): "unknown RESP2 type byte 0x\(String(byte, radix: 16))"
        case .badInteger(let text): "not a decimal integer: \"\(text)\""
        case .badLength(let length): "invalid length \(length)"
        case .missingCRLF: "bulk string not terminated by CR LF"
        case .lineTooLong(let limit): "line longer than \(limit) bytes without CR LF"
        case .tooLarge(let length, let limit): "length \(length) exceeds the limit of \(limit)"
        case .tooDeep(let limit): "arrays nested deeper than \(limit)"
        case .tooMuchBuffered(let bytes, let limit): "an incomplete reply of \(bytes) bytes exceeds the buffer limit of \(limit)"
        }
    }
}
