/// What may be written on an HTTP/1.1 connection as a field value or a request target: the checks
/// the gateway makes on the heads it writes, where it makes them (``HeaderName/isToken(_:)`` is a
/// field name's and a method's).
///
/// A head is checked where it is put together rather than by a channel handler of its own (NIO's
/// `NIOHTTPRequestHeadersValidator` and `NIOHTTPResponseHeadersValidator`): one scan of the bytes
/// either way, without a pipeline hop, an unwrapping cast and a copy of each part on its way out.
/// What these refuse is what those refuse, so that a value put together from a token's claim, a
/// policy or a client's field cannot split one message into two.
public enum WireSyntax {
    /// Whether a field can be written as it is: its name a token, its value a field value.
    @inline(__always)
    public static func isField(name: String, value: String) -> Bool {
        HeaderName.isToken(name) && isFieldValue(value)
    }

    /// Whether `value` is an RFC 9110 §5.5 field value: visible ASCII, space, horizontal tab and
    /// obs-text (0x80–0xFF). Every other control byte is refused, CR, LF and NUL among them: the
    /// RFC allows some to be kept "in a safe context", which a proxy cannot know it writes into.
    public static func isFieldValue(_ value: String) -> Bool {
        value.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isFieldValueByte) } ?? value.utf8.allSatisfy(isFieldValueByte)
    }

    /// Whether `target` holds only bytes an RFC 9112 §3.2 request-target may carry as they are
    /// (RFC 3986's unreserved, gen-delims and sub-delims, and `%` for the rest, percent-encoded):
    /// no space, control byte, non-ASCII byte, nor any of `" < > \ ^ ` { | }`.
    public static func isRequestTarget(_ target: String) -> Bool {
        isRequestTarget(target[...])
    }

    /// ``isRequestTarget(_:)`` for a slice of a URL, read in place.
    public static func isRequestTarget(_ target: Substring) -> Bool {
        target.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isRequestTargetByte) }
            ?? target.utf8.allSatisfy(isRequestTargetByte)
    }

    /// Whether `byte` may stand in a field value (``isFieldValue(_:)``'s rule, for a reader that
    /// checks bytes before it makes a string of them).
    @inline(__always)
    public static func isFieldValueByte(_ byte: UInt8) -> Bool {
        (byte >= 0x20 && byte != 0x7F) || byte == 0x09
    }

    @inline(__always)
    private static func isRequestTargetByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
            UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "["), UInt8(ascii: "]"),
            UInt8(ascii: "@"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="),
            UInt8(ascii: "%"):
            true
        default:
            false
        }
    }
}
