import NIOCore

/// Encodes RESP2 values; a command is an array of bulk strings (``RESPValue/command(_:)``).
public enum RESPValueEncoder {
    /// A command (an array of bulk strings) written straight into RESP bytes: what
    /// ``RESPValue/command(_:)`` then ``write(_:to:)`` would write, without the values between.
    public static func command(_ parts: [String]) -> ByteBuffer {
        var out = ByteBuffer()
        out.reserveCapacity(16 + parts.reduce(0) { $0 + $1.utf8.count + 16 })
        out.writeInteger(UInt8(ascii: "*"))
        out.writeString(String(parts.count))
        out.writeStaticString("\r\n")
        for part in parts {
            out.writeInteger(UInt8(ascii: "$"))
            out.writeString(String(part.utf8.count))
            out.writeStaticString("\r\n")
            out.writeString(part)
            out.writeStaticString("\r\n")
        }
        return out
    }

    /// Writes `value` in RESP2. A simple string or error must not contain CR or LF: they are the
    /// caller's own constants, never user data (which travels as bulk strings).
    public static func write(_ value: RESPValue, to out: inout ByteBuffer) {
        switch value {
        case .simpleString(let text):
            out.writeInteger(UInt8(ascii: "+"))
            out.writeString(text)
            out.writeStaticString("\r\n")
        case .error(let text):
            out.writeInteger(UInt8(ascii: "-"))
            out.writeString(text)
            out.writeStaticString("\r\n")
        case .integer(let number):
            out.writeInteger(UInt8(ascii: ":"))
            out.writeString(String(number))
            out.writeStaticString("\r\n")
        case .bulkString(nil):
            out.writeStaticString("$-1\r\n")
        case .bulkString(let bytes?):
            out.writeInteger(UInt8(ascii: "$"))
            out.writeString(String(bytes.readableBytes))
            out.writeStaticString("\r\n")
            out.writeImmutableBuffer(bytes)
            out.writeStaticString("\r\n")
        case .array(nil):
            out.writeStaticString("*-1\r\n")
        case .array(let values?):
            out.writeInteger(UInt8(ascii: "*"))
            out.writeString(String(values.count))
            out.writeStaticString("\r\n")
            for element in values { write(element, to: &out) }
        }
    }
}
