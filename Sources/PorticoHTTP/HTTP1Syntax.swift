/// The pieces of RFC 9112's message syntax that the gateway's two HTTP/1.1 readers share: the
/// client leg's request decoder and the upstream leg's response decoder. Each reads its own start
/// line and decides its own strictness (a request's line ends must be CR LF; a backend's may be a
/// bare LF, as RFC 9112 §2.2 allows a recipient to accept) and names its own errors; what a head's
/// end, a field line and a chunk-size line are is read here, once.
public enum HTTP1Syntax {
    /// Where the head at the front of `bytes` ends (the index after the empty line that ends it:
    /// LF LF or LF CR LF), or nil while it has not arrived. `scanned` is how far an earlier search
    /// of the same bytes got; the search resumes two bytes before it, since the end may straddle two
    /// reads. A bare LF ending the head is found too, for a strict reader to refuse rather than
    /// wait past.
    public static func headEnd(in bytes: UnsafeRawBufferPointer, scanned: Int) -> Int? {
        var index = max(0, scanned - 2)
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") {
                if index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "\n") { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == UInt8(ascii: "\r"), bytes[index + 2] == UInt8(ascii: "\n") {
                    return index + 3
                }
            }
            index += 1
        }
        return nil
    }

    /// A field line read (RFC 9112 §5), or why it is not one.
    public enum FieldLine {
        /// The name (a token) and the value without the whitespace around it (RFC 9110 §5.5
        /// field-value bytes only), both in place in the line.
        case field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
        /// The line starts with whitespace: a folded continuation (obs-fold, which a server and a
        /// gateway may refuse, RFC 9112 §5.2).
        case folded
        case noColon
        /// The name is empty or not a token (whitespace before the colon included).
        case invalidName
        /// The value holds a control byte.
        case invalidValue
    }

    /// `field-name ":" OWS field-value OWS`, the line without its line end.
    public static func fieldLine(_ line: UnsafeRawBufferPointer) -> FieldLine {
        guard let first = line.first else { return .noColon }
        guard first != UInt8(ascii: " "), first != UInt8(ascii: "\t") else { return .folded }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return .noColon }
        let name = UnsafeRawBufferPointer(rebasing: line[..<colon])
        guard !name.isEmpty, name.allSatisfy(HeaderName.isTokenByte) else { return .invalidName }
        var start = colon + 1
        var end = line.count
        while start < end, line[start] == UInt8(ascii: " ") || line[start] == UInt8(ascii: "\t") { start += 1 }
        while end > start, line[end - 1] == UInt8(ascii: " ") || line[end - 1] == UInt8(ascii: "\t") { end -= 1 }
        let value = UnsafeRawBufferPointer(rebasing: line[start..<end])
        guard value.allSatisfy(WireSyntax.isFieldValueByte) else { return .invalidValue }
        return .field(name: name, value: value)
    }

    /// A chunk-size line read (RFC 9112 §7.1), or why it is not one.
    public enum ChunkSizeLine: Equatable {
        case size(Int)
        /// More than 15 significant hexadecimal digits (15 always fit an `Int`; no chunk comes near).
        case tooLong
        case noSize
        /// Something other than extensions follows the size.
        case malformed
    }

    /// `chunk-size [ chunk-ext ]`, the line without its line end; the extensions (`;name[=value]`,
    /// field-value bytes) are skipped. `whitespaceBeforeExtensions`: whether RFC 9112's BWS before
    /// them is taken (a backend's reader takes it; a client's refuses it, as llhttp does, since a
    /// reader that skips it and one that does not could find different chunks in the same bytes).
    public static func chunkSizeLine(_ line: some Collection<UInt8>, whitespaceBeforeExtensions: Bool) -> ChunkSizeLine {
        var size = 0
        var digits = 0
        // Leading zeros are allowed and do not count toward the digits' limit.
        var significant = 0
        for byte in line {
            let value: Int
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = Int(byte - UInt8(ascii: "A")) + 10
            default: value = -1
            }
            guard value >= 0 else { break }
            digits += 1
            if size > 0 || value > 0 { significant += 1 }
            guard significant <= 15 else { return .tooLong }
            size = size << 4 | value
        }
        guard digits > 0 else { return .noSize }
        var rest = line.dropFirst(digits)
        if whitespaceBeforeExtensions { rest = rest.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") } }
        if let first = rest.first {
            guard first == UInt8(ascii: ";"), rest.allSatisfy(WireSyntax.isFieldValueByte) else { return .malformed }
        }
        return .size(size)
    }

    /// The elements of a comma-separated list (RFC 9110 §5.6.1), each without the whitespace around
    /// it (empty ones included), split at the commas' bytes: no array of them is made, and no
    /// grapheme breaking is run, as `split` on the `Character` view would.
    public struct ListElements: Sequence, IteratorProtocol {
        private var rest: Substring?

        public init(_ value: String) { rest = value.isEmpty ? nil : Substring(value) }

        public mutating func next() -> Substring? {
            guard let current = rest else { return nil }
            guard let comma = current.utf8.firstIndex(of: UInt8(ascii: ",")) else {
                rest = nil
                return current.trimmingOptionalWhitespace()
            }
            let after = current.utf8.index(after: comma)
            rest = after == current.endIndex ? nil : current[after...]
            return current[..<comma].trimmingOptionalWhitespace()
        }
    }

    /// Calls `body` with each element of the comma-separated list `value`, read in place, without
    /// the optional whitespace around it (an element may be empty: `a,,b` has three).
    public static func forEachElement(of value: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        var start = 0
        while start <= value.count {
            var end = start
            while end < value.count && value[end] != UInt8(ascii: ",") { end += 1 }
            var first = start
            var last = end
            while first < last && (value[first] == UInt8(ascii: " ") || value[first] == UInt8(ascii: "\t")) { first += 1 }
            while last > first && (value[last - 1] == UInt8(ascii: " ") || value[last - 1] == UInt8(ascii: "\t")) { last -= 1 }
            body(UnsafeRawBufferPointer(rebasing: value[first..<last]))
            start = end + 1
        }
    }

    /// Whether the comma-separated list `value` holds `lowercaseToken`, ignoring ASCII case.
    public static func list(_ value: String, contains lowercaseToken: String) -> Bool {
        ListElements(value).contains { HeaderName.matches($0, lowercaseToken) }
    }

    /// The last element of the comma-separated list `value`, without the whitespace around it.
    public static func lastElement(of value: String) -> Substring {
        let whole = Substring(value)
        guard let comma = whole.utf8.lastIndex(of: UInt8(ascii: ",")) else { return whole.trimmingOptionalWhitespace() }
        return whole[whole.utf8.index(after: comma)...].trimmingOptionalWhitespace()
    }
}
