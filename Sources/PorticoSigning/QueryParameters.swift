import PorticoHTTP

/// `@query-param` support (RFC 9421 §2.2.8): the query is parsed as
/// `application/x-www-form-urlencoded` (WHATWG URL §5.1), and names and values are re-encoded with
/// that format's percent-encode set, so that `a+b`, `a%20b` and `a b` all sign as `a%20b`.
///
/// Read over the query's bytes in one pass (``find(_:in:)``): a verifier covering a few
/// parameters of a query of hundreds must not re-encode, or even make strings of, the ones it does
/// not cover.
enum QueryParameters {
    /// For each name in `names` (re-encoded, as `@query-param`'s `name` parameter holds it), its
    /// first value in `query` (the bytes after `?`), re-encoded, and how often the name occurs;
    /// names absent from the query are absent from the result.
    ///
    /// Each pair's name is re-encoded into one scratch buffer and looked up by binary search among
    /// the names wanted (a signature covers a few dozen at most), sorted: no string is made and
    /// nothing is hashed per pair, and whatever names an attacker chooses, a pair costs at most a
    /// handful of byte comparisons.
    static func find(_ names: Set<String>, in query: UnsafeBufferPointer<UInt8>) -> [String: (value: String, count: Int)] {
        guard !names.isEmpty else { return [:] }
        let wanted = SortedByteStrings(names)
        // The longest name wanted: a pair whose re-encoded name grows past it is none of them.
        let longest = wanted.longest
        var values = [[UInt8]?](repeating: nil, count: wanted.count)
        var counts = [Int](repeating: 0, count: wanted.count)
        var scratch: [UInt8] = []
        scratch.reserveCapacity(longest + 3)
        QueryPairs.forEach(in: query) { name, value in
            scratch.removeAll(keepingCapacity: true)
            guard reencode(query[name], into: &scratch, atMost: longest),
                let match = scratch.withUnsafeBufferPointer({ wanted.position(of: $0) })
            else { return }
            counts[match] += 1
            guard counts[match] == 1 else { return }
            var bytes: [UInt8] = []
            if let value { _ = reencode(query[value], into: &bytes, atMost: .max) }
            values[match] = bytes
        }
        var found: [String: (value: String, count: Int)] = [:]
        for index in 0..<wanted.count where counts[index] > 0 {
            found[wanted[index]] = (String(decoding: values[index] ?? [], as: UTF8.self), counts[index])
        }
        return found
    }

    /// Decodes `text` (`+` is a space, `%XX` a byte) and percent-encodes every byte but ASCII
    /// letters, digits and `*-._` (a space becomes `%20`, as in RFC 9421's examples), appending to
    /// `out`; false as soon as `out` would hold more than `limit` bytes.
    static func reencode(_ text: Slice<UnsafeBufferPointer<UInt8>>, into out: inout [UInt8], atMost limit: Int) -> Bool {
        var index = text.startIndex
        while index < text.endIndex {
            var byte = text[index]
            index += 1
            if byte == UInt8(ascii: "+") {
                byte = UInt8(ascii: " ")
            } else if byte == UInt8(ascii: "%"), index + 1 < text.endIndex,
                let high = hexValue(text[index]), let low = hexValue(text[index + 1])
            {
                byte = high << 4 | low
                index += 2
            }
            if isUnencoded(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
            if out.count > limit { return false }
        }
        return true
    }

    /// `bytes` percent-encoded with the form format's set (a name given unencoded, for
    /// ``ComponentIdentifier/queryParameter(_:)``).
    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            if isUnencoded(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// ASCII letters, digits and `*-._`: what the form format leaves as it is.
    private static func isUnencoded(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "*"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
