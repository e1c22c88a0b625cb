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
        guard let count = decodedCount(encoded) else { return nil }
        var valid = true
        let output = [UInt8](unsafeUninitializedCapacity: count) { buffer, written in
            valid = decode(encoded, into: buffer)
            written = valid ? count : 0
        }
        return valid ? output : nil
    }

    /// How many bytes `encoded` decodes to; nil when its length (with its padding) cannot be
    /// base64's.
    static func decodedCount(_ encoded: UnsafeBufferPointer<UInt8>) -> Int? {
        let length = unpaddedLength(encoded)
        let padding = encoded.count - length
        // Padding, when present, completes the last group of four; one leftover character is never valid.
        guard length % 4 != 1, padding == 0 || (length + padding) % 4 == 0 else { return nil }
        let tail = length % 4
        return length / 4 * 3 + (tail == 0 ? 0 : tail - 1)
    }

    /// The length without its `=` padding (at most two).
    private static func unpaddedLength(_ encoded: UnsafeBufferPointer<UInt8>) -> Int {
        var length = encoded.count
        while length > 0, encoded[length - 1] == UInt8(ascii: "="), encoded.count - length < 2 { length -= 1 }
        return length
    }

    /// Decodes `encoded` into `output`, which holds exactly ``decodedCount(_:)`` bytes; false when
    /// a character is outside the alphabet. Written in place: appending byte by byte checked an
    /// array's capacity and uniqueness for each one.
    static func decode(_ encoded: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        guard output.count == decodedCount(encoded) else { return false }  // written without bounds checks below
        let length = unpaddedLength(encoded)
        let sextets = Self.sextets
        var read = 0
        var written = 0
        while read + 4 <= length {
            let a = sextets[Int(encoded[read])]
            let b = sextets[Int(encoded[read + 1])]
            let c = sextets[Int(encoded[read + 2])]
            let d = sextets[Int(encoded[read + 3])]
            guard (a | b | c | d) & 0xC0 == 0 else { return false }  // one test for the four
            let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
            output[written] = UInt8(truncatingIfNeeded: group >> 16)
            output[written + 1] = UInt8(truncatingIfNeeded: group >> 8)
            output[written + 2] = UInt8(truncatingIfNeeded: group)
            read += 4
            written += 3
        }
        // Two or three characters left: one or two bytes, the leftover bits dropped.
        var group: UInt32 = 0
        for index in read..<length {
            let value = sextets[Int(encoded[index])]
            guard value & 0xC0 == 0 else { return false }
            group = group << 6 | UInt32(value)
        }
        switch length - read {
        case 2:
            output[written] = UInt8(truncatingIfNeeded: group >> 4)
        case 3:
            output[written] = UInt8(truncatingIfNeeded: group >> 10)
            output[written + 1] = UInt8(truncatingIfNeeded: group >> 2)
        default:
            break
        }
        return true
    }

    /// Each byte's value in the alphabet; 64 for the padding `=`, 0xFF for bytes outside both. A
    /// table, so that decoding and the parser's byte-sequence check cost a load per character.
    static let sextets: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            table[Int(byte)] = UInt8(value)
        }
        table[Int(UInt8(ascii: "="))] = 64
        return table
    }()
}
