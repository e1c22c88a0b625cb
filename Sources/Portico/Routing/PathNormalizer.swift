/// Brings a request path into the one form the gateway routes on and forwards, and refuses the
/// paths that could lead a backend outside the route the gateway published.
///
/// A backend that decodes and normalises a path itself (most frameworks do) would otherwise read
/// `/v1/quotes/%2e%2e/%2e%2e/admin` as `/admin`: a route the gateway never checked. So the
/// gateway decides what the path means, once, before routing:
///
/// 1. Percent-encoding is normalised as RFC 3986 §6.2.2.2 says: an encoded unreserved character
///    (`ALPHA DIGIT - . _ ~`) is decoded, and the hex digits of what stays encoded are uppercased.
///    `/%65cho/%2e%2E` becomes `/echo/..`; `%2f` becomes `%2F`.
/// 2. A dot-segment (`.` or `..`, in any encoding) is refused: RFC 3986 §5.2.4 would remove it,
///    and a gateway that removed it too would route one path and let the backend see another. So is
///    a segment whose part before a `;` (raw or `%3B`) is one: Tomcat, Jetty and Spring strip path
///    parameters before they remove dot-segments, so to them `/a/..;x/admin` is `/admin`.
/// 3. An encoded slash or backslash (`%2F`, `%5C`) inside a segment is reported, so the route stage
///    can refuse it unless the service lets it through: backends disagree on whether it separates
///    segments. A raw backslash, which is not a URI character at all but which some servers take for
///    a slash, and an encoded NUL, which C backends take for the end of the string, are refused.
/// 4. A `#` is refused: a fragment is never sent in a request target (RFC 9112 §3.2), and a backend
///    that reads one as the fragment sees a shorter path than the gateway routed.
/// 5. The bytes the path spells, decoded, must be UTF-8 (RFC 3629): an overlong form (`%C0%AE` is
///    a `.` to a lax decoder), a surrogate or a truncated sequence is refused, since backends
///    decode such bytes in different ways.
///
/// Well-formed paths that need no change (the common case) are returned without a copy.
public enum PathNormalizer {
    /// A path the gateway can route, in normal form.
    public struct Normalized: Sendable, Equatable {
        public let path: Substring
        /// Whether a segment holds `%2F` or `%5C`; the route stage refuses those unless the service
        /// sets `allowEncodedSlashes`.
        public let hasEncodedSlash: Bool
    }

    /// Why a path was refused; each case becomes a 400 answer.
    public enum Rejection: Error, Sendable, Equatable, CustomStringConvertible {
        /// A `.` or `..` segment, after decoding.
        case dotSegment
        /// A `%` not followed by two hex digits.
        case invalidPercentEncoding
        /// A raw `\`.
        case backslash
        /// `%00`.
        case encodedNul
        /// A raw `#`.
        case fragment
        /// Bytes that, decoded, are not UTF-8.
        case invalidUTF8

        public var description: String {
            switch self {
            case .dotSegment: "The request path must not contain '.' or '..' segments, in any encoding."
            case .invalidPercentEncoding: "The request path has a '%' that is not followed by two hexadecimal digits."
            case .backslash: "The request path must not contain a backslash."
            case .encodedNul: "The request path must not contain an encoded NUL (%00)."
            case .fragment: "The request target must not contain '#': a fragment is not sent to a server."
            case .invalidUTF8: "The request path spells bytes that are not UTF-8 (an overlong, surrogate or truncated sequence)."
            }
        }
    }

    /// Normalises `path` (the request target's path, without its query).
    public static func normalize(_ path: Substring) -> Result<Normalized, Rejection> {
        var needsRewrite = false
        var hasEncodedSlash = false
        var segment = Segment()
        var utf8Check = UTF8Check()
        let utf8 = path.utf8
        var index = utf8.startIndex
        // One pass decides whether anything must change and finds what must be refused.
        while index != utf8.endIndex {
            let byte = utf8[index]
            var decoded = byte
            switch byte {
            case UInt8(ascii: "/"):
                guard segment.end(), utf8Check.atBoundary() else { return .failure(utf8Check.failed ? .invalidUTF8 : .dotSegment) }
                index = utf8.index(after: index)
                continue
            case UInt8(ascii: "\\"):
                return .failure(.backslash)
            case UInt8(ascii: "#"):
                return .failure(.fragment)
            case UInt8(ascii: "%"):
                let first = utf8.index(after: index)
                guard first != utf8.endIndex else { return .failure(.invalidPercentEncoding) }
                let second = utf8.index(after: first)
                guard second != utf8.endIndex, let high = hexValue(utf8[first]), let low = hexValue(utf8[second]) else {
                    return .failure(.invalidPercentEncoding)
                }
                decoded = high << 4 | low
                if decoded == 0 { return .failure(.encodedNul) }
                if isUnreserved(decoded) {
                    needsRewrite = true
                } else {
                    if isLowercaseHex(utf8[first]) || isLowercaseHex(utf8[second]) { needsRewrite = true }
                    if decoded == UInt8(ascii: "/") || decoded == UInt8(ascii: "\\") { hasEncodedSlash = true }
                }
                index = utf8.index(after: second)
            default:
                index = utf8.index(after: index)
            }
            guard utf8Check.take(decoded) else { return .failure(.invalidUTF8) }
            guard segment.take(decoded) else { return .failure(.dotSegment) }
        }
        guard segment.end() else { return .failure(.dotSegment) }
        guard utf8Check.atBoundary() else { return .failure(.invalidUTF8) }
        guard needsRewrite else { return .success(Normalized(path: path, hasEncodedSlash: hasEncodedSlash)) }
        return .success(Normalized(path: Substring(rewrite(path)), hasEncodedSlash: hasEncodedSlash))
    }

    /// One segment's decoded bytes as far as a dot-segment is concerned: whether everything before
    /// its end, or before its first `;`, is one or two dots.
    private struct Segment {
        private var length = 0
        private var dots = 0
        /// A `;` was seen: what follows is a path parameter, which the check no longer counts.
        private var inParameters = false

        private var isDotSegment: Bool { length > 0 && length <= 2 && dots == length }

        /// Takes one decoded byte; false when a `;` ends a dot-segment.
        mutating func take(_ byte: UInt8) -> Bool {
            guard !inParameters else { return true }
            if byte == UInt8(ascii: ";") {
                inParameters = true
                return !isDotSegment
            }
            length += 1
            if byte == UInt8(ascii: ".") { dots += 1 }
            return true
        }

        /// The segment ended (a `/` or the end of the path); false when it was a dot-segment.
        mutating func end() -> Bool {
            defer { self = Segment() }
            return inParameters || !isDotSegment
        }
    }

    /// Checks decoded bytes as UTF-8 one at a time (RFC 3629 §4, the Unicode Standard's table 3-7):
    /// a lead byte says how many continuation bytes follow and in which range the first of them
    /// lies, which rules out overlong forms, surrogates and code points past U+10FFFF.
    private struct UTF8Check {
        /// Continuation bytes still expected.
        private var pending = 0
        /// The range the next continuation byte must lie in.
        private var lower: UInt8 = 0x80
        private var upper: UInt8 = 0xBF
        private(set) var failed = false

        mutating func take(_ byte: UInt8) -> Bool {
            if pending > 0 {
                guard byte >= lower && byte <= upper else { return fail() }
                pending -= 1
                lower = 0x80
                upper = 0xBF
                return true
            }
            switch byte {
            case 0x00...0x7F: return true
            case 0xC2...0xDF: pending = 1
            case 0xE0: (pending, lower) = (2, 0xA0)
            case 0xE1...0xEC, 0xEE...0xEF: pending = 2
            case 0xED: (pending, upper) = (2, 0x9F)
            case 0xF0: (pending, lower) = (3, 0x90)
            case 0xF1...0xF3: pending = 3
            case 0xF4: (pending, upper) = (3, 0x8F)
            default: return fail()
            }
            return true
        }

        /// A `/` or the end of the path: no sequence may be left open.
        mutating func atBoundary() -> Bool {
            if pending > 0 { return fail() }
            return true
        }

        private mutating func fail() -> Bool {
            failed = true
            return false
        }
    }

    /// Decodes encoded unreserved characters and uppercases the hex of the rest; `path` has been
    /// checked to be well-formed.
    private static func rewrite(_ path: Substring) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(path.utf8.count)
        let utf8 = Array(path.utf8)
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                index += 1
                continue
            }
            let decoded = hexValue(utf8[index + 1])! << 4 | hexValue(utf8[index + 2])!
            if isUnreserved(decoded) {
                bytes.append(decoded)
            } else {
                bytes.append(byte)
                bytes.append(uppercased(utf8[index + 1]))
                bytes.append(uppercased(utf8[index + 2]))
            }
            index += 3
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// RFC 3986 §2.3: `ALPHA / DIGIT / "-" / "." / "_" / "~"`.
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// A hex digit's value, either case.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func isLowercaseHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    private static func uppercased(_ byte: UInt8) -> UInt8 {
        isLowercaseHex(byte) ? byte - 32 : byte
    }
}
