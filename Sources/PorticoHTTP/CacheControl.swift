/// The `Cache-Control` directives of a request or a response (RFC 9111 §5.2), and `stale-while-
/// revalidate` and `stale-if-error` (RFC 5861), read from every line of the field.
///
/// Reading is conservative where the RFC lets a cache choose: a directive given twice keeps its
/// first value (§4.2.1); a `max-age` or `s-maxage` that is not delta-seconds makes the response
/// stale rather than being ignored; a qualified `private="…"` or `no-cache="…"` counts as the
/// unqualified directive (a shared cache may not store what it names, and this cache does not
/// strip fields); a delta-seconds too large for 31 bits is 2³¹ (§1.2.2). Unknown directives are
/// ignored (§5.2.3).
public struct CacheControl: Sendable, Equatable {
    // Both.
    public var maxAge: Int?
    public var noCache = false
    public var noStore = false
    public var noTransform = false
    public var staleIfError: Int?
    // Responses.
    public var sMaxAge: Int?
    public var isPrivate = false
    public var isPublic = false
    public var mustRevalidate = false
    public var proxyRevalidate = false
    public var mustUnderstand = false
    public var immutable = false
    public var staleWhileRevalidate: Int?
    // Requests.
    /// `max-stale` without a value accepts any staleness: `Int.max`.
    public var maxStale: Int?
    public var minFresh: Int?
    public var onlyIfCached = false

    /// The largest delta-seconds kept (RFC 9111 §1.2.2).
    public static let maxDeltaSeconds = 2_147_483_648

    public init() {}

    /// Reads the directives of every `Cache-Control` line, in order.
    public init(lines: some Sequence<some StringProtocol>) {
        for line in lines {
            for directive in Self.directives(in: line) { apply(directive.name, directive.value) }
        }
    }

    private mutating func apply(_ name: Substring, _ value: Substring?) {
        switch name.lowercased() {
        case "max-age": if maxAge == nil { maxAge = Self.delta(value) ?? 0 }
        case "s-maxage": if sMaxAge == nil { sMaxAge = Self.delta(value) ?? 0 }
        case "no-cache": noCache = true
        case "no-store": noStore = true
        case "no-transform": noTransform = true
        case "private": isPrivate = true
        case "public": isPublic = true
        case "must-revalidate": mustRevalidate = true
        case "proxy-revalidate": proxyRevalidate = true
        case "must-understand": mustUnderstand = true
        case "immutable": immutable = true
        case "only-if-cached": onlyIfCached = true
        case "stale-while-revalidate": if staleWhileRevalidate == nil { staleWhileRevalidate = Self.delta(value) }
        case "stale-if-error": if staleIfError == nil { staleIfError = Self.delta(value) }
        case "min-fresh": if minFresh == nil { minFresh = Self.delta(value) }
        case "max-stale":
            if maxStale == nil { maxStale = value == nil ? Int.max : Self.delta(value) }
        default: break
        }
    }

    /// `1*DIGIT`, quoted or not; nil for anything else (a sign, a fraction, nothing).
    public static func delta(_ value: Substring?) -> Int? {
        guard var text = value else { return nil }
        if text.count >= 2, text.first == "\"", text.last == "\"" { text = text.dropFirst().dropLast() }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        let digits = text.drop(while: { $0 == "0" })
        guard digits.count <= 10, let number = Int(digits.isEmpty ? "0" : digits) else { return maxDeltaSeconds }
        return min(number, maxDeltaSeconds)
    }

    /// `#cache-directive`: `token [ "=" ( token / quoted-string ) ]`, separated by commas that are
    /// not inside a quoted string.
    static func directives(in line: some StringProtocol) -> [(name: Substring, value: Substring?)] {
        let text = Substring(line)
        var result: [(name: Substring, value: Substring?)] = []
        var start = text.startIndex
        var index = start
        var quoted = false
        var escaped = false
        func take(_ end: Substring.Index) {
            let item = text[start..<end].trimmingOptionalWhitespace()
            guard !item.isEmpty else { return }
            if let equals = item.firstIndex(of: "=") {
                let name = item[..<equals].trimmingOptionalWhitespace()
                let value = item[item.index(after: equals)...].trimmingOptionalWhitespace()
                if !name.isEmpty { result.append((name, value)) }
            } else {
                result.append((item, nil))
            }
        }
        while index < text.endIndex {
            let character = text[index]
            if escaped {
                escaped = false
            } else if quoted {
                if character == "\\" { escaped = true } else if character == "\"" { quoted = false }
            } else if character == "\"" {
                quoted = true
            } else if character == "," {
                take(index)
                start = text.index(after: index)
            }
            index = text.index(after: index)
        }
        take(text.endIndex)
        return result
    }
}
