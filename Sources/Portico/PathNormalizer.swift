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
///    and a gateway that removed it too would route one path and let the backend see another.
/// 3. An encoded slash or backslash (`%2F`, `%5C`) inside a segment is reported, so the route stage
///    can refuse it unless the service lets it through: backends disagree on whether it separates
///    segments. A raw backslash, which is not a URI character at all but which some servers take for
///    a slash, and an encoded NUL, which C backends take for the end of the string, are refused.
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

        public var description: String {
            switch self {
            case .dotSegment: "The request path must not contain '.' or '..' segments, in any encoding."
            case .invalidPercentEncoding: "The request path has a '%' that is not followed by two hexadecimal digits."
            case .backslash: "The request path must not contain a backslash."
            case .encodedNul: "The request path must not contain an encoded NUL (%00)."
            }
        }
    }

    /// Normalises `path` (the request target's path, without its query).
    public static func normalize(_ path: Substring) -> Result<Normalized, Rejection> {
        var needsRewrite = false
        var hasEncodedSlash = false
        var dotsInSegment = 0
        var segmentLength = 0
        let utf8 = path.utf8
        var index = utf8.startIndex
        // One pass decides whether anything must change and finds what must be refused.
        while index != utf8.endIndex {
            let byte = utf8[index]
            switch byte {
            case UInt8(ascii: "/"):
                if segmentLength > 0 && dotsInSegment == segmentLength && segmentLength <= 2 { return .failure(.dotSegment) }
                dotsInSegment = 0
                segmentLength = 0
                index = utf8.index(after: index)
                continue
            case UInt8(ascii: "\\"):
                return .failure(.backslash)
            case UInt8(ascii: "%"):
                let first = utf8.index(after: index)
                guard first != utf8.endIndex else { return .failure(.invalidPercentEncoding) }
                let second = utf8.index(after: first)
                guard second != utf8.endIndex, let high = hexValue(utf8[first]), let low = hexValue(utf8[second]) else {
                    return .failure(.invalidPercentEncoding)
                }
                let decoded = high << 4 | low
                if decoded == 0 { return .failure(.encodedNul) }
                if isUnreserved(decoded) {
                    needsRewrite = true
                    if decoded == UInt8(ascii: ".") { dotsInSegment += 1 }
                } else {
                    if isLowercaseHex(utf8[first]) || isLowercaseHex(utf8[second]) { needsRewrite = true }
                    if decoded == UInt8(ascii: "/") || decoded == UInt8(ascii: "\\") { hasEncodedSlash = true }
                }
                segmentLength += 1
                index = utf8.index(after: second)
                continue
            case UInt8(ascii: "."):
                dotsInSegment += 1
            default:
                break
            }
            segmentLength += 1
            index = utf8.index(after: index)
        }
        if segmentLength > 0 && dotsInSegment == segmentLength && segmentLength <= 2 { return .failure(.dotSegment) }
        guard needsRewrite else { return .success(Normalized(path: path, hasEncodedSlash: hasEncodedSlash)) }
        return .success(Normalized(path: Substring(rewrite(path)), hasEncodedSlash: hasEncodedSlash))
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
