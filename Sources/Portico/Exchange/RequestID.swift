import NIOHTTP1
import Synchronization

/// Request ids: taken from the client when well-formed, generated otherwise.
///
/// A client-supplied id lets one trace a request across client logs and ours; it is only accepted
/// when short and made of safe characters, since it is echoed in headers and written to logs.
enum RequestID {
    /// The id of the request `head` begins: the client's `X-Request-Id` if it is acceptable, else a new one.
    static func of(_ head: HTTPRequestHead) -> String {
        head.headers.first(name: "x-request-id").flatMap { accept($0) ? $0 : nil } ?? generate()
    }

    static func accept(_ value: String) -> Bool {
        guard (1...128).contains(value.utf8.count) else { return false }
        return value.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: ":")
        }
    }

    /// A random 64-bit prefix per process, drawn once from the system generator.
    private static let processPrefix: UInt64 = {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }()
    private static let counter = Atomic<UInt64>(0)

    /// 32 lowercase hex digits (the W3C trace-id shape), unique within the process and, with
    /// overwhelming probability, across processes. Ids are for correlation, not secrets, so they come
    /// from a counter scrambled by a bijection (SplitMix64's finaliser) rather than from a system call
    /// per request.
    static func generate() -> String {
        let sequence = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let prefix = processPrefix
        let suffix = scramble(sequence &+ prefix)
        // One allocation: the 32 hex digits are written straight into the string's storage.
        return String(unsafeUninitializedCapacity: 32) { buffer in
            writeHex(prefix, into: buffer, at: 0)
            writeHex(suffix, into: buffer, at: 16)
            return 32
        }
    }

    private static func scramble(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private static func writeHex(_ value: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        let digits: StaticString = "0123456789abcdef"
        for index in 0..<16 {
            let nibble = Int((value >> UInt64(60 - index * 4)) & 0xF)
            buffer[offset + index] = digits.utf8Start[nibble]
        }
    }
}
