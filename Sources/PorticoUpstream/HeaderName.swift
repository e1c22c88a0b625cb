/// Case-insensitive comparison of header field names without allocating lowercased copies; the
/// proxy compares every forwarded field against its drop lists and the curl driver checks the
/// fields libcurl would add, so this sits on the hot path of both.
public enum HeaderName {
    /// Whether `name` equals `lowercase` (which must be lowercase ASCII), ignoring ASCII case.
    @inline(__always)
    public static func matches(_ name: String, _ lowercase: String) -> Bool {
        // Most names a lookup meets differ in length: answered before reaching either's bytes.
        guard name.utf8.count == lowercase.utf8.count else { return false }
        var name = name
        var lowercase = lowercase
        return name.withUTF8 { nameBytes in
            lowercase.withUTF8 { lowerBytes in
                for index in 0..<nameBytes.count {
                    var byte = nameBytes[index]
                    if byte >= 0x41 && byte <= 0x5A { byte |= 0x20 }
                    if byte != lowerBytes[index] { return false }
                }
                return true
            }
        }
    }

    /// Whether `name` equals any of `lowercaseNames`, ignoring ASCII case.
    public static func matchesAny(_ name: String, _ lowercaseNames: [String]) -> Bool {
        let count = name.utf8.count
        for candidate in lowercaseNames where candidate.utf8.count == count {
            if matches(name, candidate) { return true }
        }
        return false
    }
}
