/// Case-insensitive comparison of header field names without allocating lowercased copies; the
/// proxy compares every forwarded field against its drop lists and the curl driver checks the
/// fields libcurl would add, so this sits on the hot path of both.
public enum HeaderName {
    /// Whether `name` equals `lowercase` (which must be lowercase ASCII), ignoring ASCII case.
    @inline(__always)
    public static func matches(_ name: String, _ lowercase: String) -> Bool {
        matches(utf8: name.utf8, lowercase)
    }

    /// ``matches(_:_:)`` for a piece of a field value (a `Connection` token, say), without
    /// making it a `String` first.
    @inline(__always)
    public static func matches(_ name: Substring, _ lowercase: String) -> Bool {
        matches(utf8: name.utf8, lowercase)
    }

    /// ``matches(_:_:)`` for a name read in place from bytes (a line of an upstream request's
    /// fields), without making it a `String` first.
    @inline(__always)
    public static func matches(bytes name: UnsafeRawBufferPointer, _ lowercase: String) -> Bool {
        guard name.count == lowercase.utf8.count else { return false }
        return lowercase.utf8.withContiguousStorageIfAvailable { equal(name, $0) } ?? equal(name, lowercase.utf8)
    }

    @inline(__always)
    private static func matches(utf8 name: some Collection<UInt8>, _ lowercase: String) -> Bool {
        // Most names a lookup meets differ in length: answered before reaching either's bytes.
        guard name.count == lowercase.utf8.count else { return false }
        // Read in place. (`withUTF8` needs a mutable copy of each string; walking the two UTF-8
        // views side by side cost several times as much per byte. Measured in a loop of the six
        // fields of a signed request: 7.4 ns a comparison this way, 9.2 and 10.6 ns those.)
        return name.withContiguousStorageIfAvailable { nameBytes in
            lowercase.utf8.withContiguousStorageIfAvailable { equal(nameBytes, $0) } ?? equal(nameBytes, lowercase.utf8)
        } ?? equal(Array(name), lowercase.utf8)
    }

    @inline(__always)
    fileprivate static func equal(_ name: some RandomAccessCollection<UInt8>, _ lowercase: some Collection<UInt8>) -> Bool {
        var index = name.startIndex
        for expected in lowercase {
            var byte = name[index]
            if byte >= 0x41 && byte <= 0x5A { byte |= 0x20 }
            if byte != expected { return false }
            name.formIndex(after: &index)
        }
        return true
    }

    /// Whether `name` equals any of `lowercaseNames`, ignoring ASCII case.
    public static func matchesAny(_ name: String, _ lowercaseNames: [String]) -> Bool {
        let count = name.utf8.count
        for candidate in lowercaseNames where candidate.utf8.count == count {
            if matches(name, candidate) { return true }
        }
        return false
    }

    /// ``matchesAny(_:_:)`` for a name read in place from bytes (a line of a backend's response
    /// fields), without making it a `String` first.
    public static func matchesAny(bytes name: UnsafeRawBufferPointer, _ lowercaseNames: [String]) -> Bool {
        for candidate in lowercaseNames where candidate.utf8.count == name.count {
            if matches(bytes: name, candidate) { return true }
        }
        return false
    }

    /// Whether `text` is an RFC 9110 §5.6.2 `token` (what a field name and a method are made of).
    public static func isToken(_ text: some StringProtocol) -> Bool {
        // Read in place, as ``WireSyntax/isFieldValue(_:)`` reads a value: walking the UTF-8 view
        // byte by byte retained and released the string's storage around the walk, and was most of
        // the cost of checking each field a proxied request forwards.
        !text.isEmpty
            && (text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isTokenByte) } ?? text.utf8.allSatisfy(isTokenByte))
    }

    /// Whether `byte` is a `tchar` (RFC 9110 §5.6.2), one byte of a ``isToken(_:)``.
    @inline(__always)
    public static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}

/// A fixed set of lowercase field names, for names read in place as bytes (a backend's response
/// lines, which a proxy filters by name on every response): compared against the set's own bytes,
/// without a `String` of each candidate taken out of an array and read for each comparison.
public struct HeaderNameSet: Sendable {
    /// The names' bytes, one after another.
    private let bytes: [UInt8]
    /// Where each name's bytes are in ``bytes``.
    private let names: [(start: Int, count: Int)]

    /// - Parameter lowercaseNames: the names, in lowercase (as ``HeaderName/matches(_:_:)`` takes them).
    public init(_ lowercaseNames: [String]) {
        var bytes: [UInt8] = []
        var names: [(start: Int, count: Int)] = []
        for name in lowercaseNames {
            names.append((bytes.count, name.utf8.count))
            bytes.append(contentsOf: name.utf8)
        }
        self.bytes = bytes
        self.names = names
    }

    /// Whether `name` is one of the set, ignoring ASCII case.
    public func contains(bytes name: UnsafeRawBufferPointer) -> Bool {
        bytes.withUnsafeBufferPointer { all in
            for candidate in names where candidate.count == name.count {
                if HeaderName.equal(name, UnsafeBufferPointer(rebasing: all[candidate.start..<(candidate.start + candidate.count)])) {
                    return true
                }
            }
            return false
        }
    }
}
