/// Base64 (RFC 4648 §4, the standard alphabet) for the byte sequences of structured fields.
///
/// Foundation's decoder goes through `Data` and an intermediate copy for each signature; this one
/// decodes straight into the bytes the caller keeps. It accepts the value with or without its `=`
/// padding, as RFC 9651 §4.2.7 asks of parsers, and nothing else: no line breaks, no other alphabet.
enum Base64 {
    /// The bytes `text` encodes, or nil when it is not base64.
    static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode($0) }
    }

    static func decode(_ encoded: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var length = encoded.count
        var padding = 0
        while length > 0, encoded[length - 1] == UInt8(ascii: "="), padding < 2 {
            length -= 1
            padding += 1
        }
        // Padding, when present, completes the last group of four; one leftover character is never valid.
        guard length % 4 != 1, padding == 0 || (length + padding) % 4 == 0 else { return nil }
        var output = [UInt8]()
        output.reserveCapacity(length * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for index in 0..<length {
            guard let value = sextet(encoded[index]) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return output
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
