/// The byte classes of RFC 9651's grammar, shared by the parser (``StructuredDictionary``) and the
/// serialiser (``StructuredFieldWriter``), so that what one reads and the other writes are the
/// same sets by construction.
enum StructuredFieldBytes {
    static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    static func isLowercaseLetter(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") }

    static func isLetter(_ byte: UInt8) -> Bool { isLowercaseLetter(byte | 0x20) }

    /// §3.1.2: a key starts with a lowercase letter or `*`.
    static func isKeyStart(_ byte: UInt8) -> Bool { isLowercaseLetter(byte) || byte == UInt8(ascii: "*") }

    /// §3.1.2: then lowercase letters, digits, `_`, `-`, `.` and `*`.
    static func isKeyByte(_ byte: UInt8) -> Bool {
        isKeyStart(byte) || isDigit(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    /// §3.3.4: a token starts with a letter or `*`.
    static func isTokenStart(_ byte: UInt8) -> Bool { isLetter(byte) || byte == UInt8(ascii: "*") }

    /// §3.3.4: then RFC 9110's tchar, plus `:` and `/`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"), UInt8(ascii: ":"), UInt8(ascii: "/"):
            true
        default: false
        }
    }

    /// §3.3.5: the base64 alphabet and its padding (``Base64/sextets``; a loop over many bytes
    /// reads the table once itself).
    static func isBase64Byte(_ byte: UInt8) -> Bool {
        Base64.sextets[Int(byte)] != 0xFF
    }
}
