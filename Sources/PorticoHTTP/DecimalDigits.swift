/// `1*DIGIT` (RFC 5234) read as a number: what a `Content-Length`, a port and an API version are
/// made of. Each caller adds its own rules (whitespace around a length, no leading zero in a
/// version); the digits themselves are read here, once.
public enum DecimalDigits {
    /// The value of `digits` when it is one to `maxDigits` ASCII digits and nothing else; nil
    /// otherwise (empty, a sign, a letter, too long). `maxDigits` at most 18, which an `Int` holds.
    public static func value(of digits: some Collection<UInt8>, maxDigits: Int) -> Int? {
        precondition(maxDigits <= 18, "more than 18 digits may not fit an Int")
        guard !digits.isEmpty, digits.count <= maxDigits else { return nil }
        var value = 0
        for byte in digits {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value * 10 + Int(digit)
        }
        return value
    }
}
