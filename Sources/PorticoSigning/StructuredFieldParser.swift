import Foundation
import RawStructuredFieldValues

/// RFC 9651 §4.2 over a buffer of bytes: the one reader of structured fields in this module.
///
/// **Why not the structured-headers library's parser.** Its dictionary parser keeps the last of
/// two members with the same key, as RFC 9651 says; a verifier must instead refuse a repeated label,
/// or a client could hide a second signature behind the first. Finding repeats used to take a
/// second, hand-written scan of the same bytes, and two parsers of one field can disagree, which is
/// a security risk of its own. This one refuses repeats as it meets them. It also runs over the
/// field's bytes in place, where the library's generic parser, called across modules, ran
/// unspecialised (a witness call per byte).
///
/// The dictionary and inner-list grammar hand each member and each item to the caller, who reads
/// it with the same item, parameter and bare-item rules. ``StructuredDictionary`` collects every
/// member; ``SignatureFields`` reads the one signature it needs straight into its own types, with
/// no dictionary of items in between, and still parses (and so checks) every other member. Both
/// are readings of one grammar, not two parsers that could disagree.
struct StructuredFieldParser {
    typealias ParseError = StructuredDictionary.ParseError
    typealias Parameters = [(key: String, value: RFC9651BareItem)]

    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    /// False once the value being read holds anything its serialisation would write differently;
    /// see ``StructuredDictionary/members``. A reader sets it before a value and reads it after.
    var canonical = true
    let limits: Limits

    /// How many members a dictionary, and how many parameters an item or inner list, may have;
    /// more fails the parse. RFC 9651 asks parsers to take at least 1,024 members and 256
    /// parameters, and a general reading does (``unbounded``); the signature fields carry a few
    /// of each, and a verifier reads them before it knows who sent them, so it holds them to far
    /// fewer (``signatureFields``): each key costs a hash to check for repeats.
    struct Limits: Sendable {
        var members: Int
        var parameters: Int

        static let unbounded = Limits(members: .max, parameters: .max)
        /// `Signature-Input` and `Signature`: a request carries one signature, or a few when
        /// intermediaries add theirs; a signature has at most 7 parameters, a component 2.
        static let signatureFields = Limits(members: 64, parameters: 16)
    }

    init(bytes: UnsafeBufferPointer<UInt8>, limits: Limits = .unbounded) {
        self.bytes = bytes
        self.limits = limits
    }

    /// Runs `read` with a parser over `value`'s bytes, in place. (`String.withUTF8` rethrows
    /// untyped, so the typed error is carried out as a result.)
    static func read(
        _ value: String, limits: Limits = .unbounded, _ read: (inout StructuredFieldParser) throws(ParseError) -> Void
    ) throws(ParseError) {
        var value = value
        let result = value.withUTF8 { bytes -> Result<Void, ParseError> in
            var parser = StructuredFieldParser(bytes: bytes, limits: limits)
            do throws(ParseError) {
                try read(&parser)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    func fail(_ reason: String) -> ParseError {
        ParseError(reason: reason, offset: index)
    }

    private mutating func skipSpaces() {
        while current == 0x20 { index += 1 }
    }

    /// §4.2 and §4.2.2: a whole field value as a dictionary, with leading and trailing spaces and
    /// nothing else after it, except that a repeated key fails instead of replacing the earlier
    /// member.
    ///
    /// `member` is called for each member with its key's bytes, the parser standing just after the
    /// key; it must read the member's value (``memberValue()`` reads any).
    ///
    /// `refusingRepeats: false` reads a repeated key as RFC 9651 does (the caller keeps the last
    /// value), and spends nothing on finding repeats.
    @inline(__always)
    mutating func dictionaryField(
        refusingRepeats: Bool = true, _ member: (inout StructuredFieldParser, Range<Int>) throws(ParseError) -> Void
    ) throws(ParseError) {
        skipSpaces()
        // The keys seen so far: a field almost always has one member, so the first is kept apart
        // and the others (an allocation) are only recorded from a second on.
        var firstKey: Range<Int>?
        var laterKeys = SeenKeys()
        var members = 0
        while index < bytes.count {
            members += 1
            if members > limits.members { throw fail("more than \(limits.members) members") }
            let key = try self.key()
            if refusingRepeats, let firstKey, sameBytes(firstKey, key) || !laterKeys.insert(key, of: self) {
                index = key.lowerBound
                let text = string(key)
                var error = fail("the key \"\(text)\" occurs more than once")
                error.duplicateKey = text
                throw error
            }
            if firstKey == nil { firstKey = key }
            try member(&self, key)
            while current == 0x20 || current == 0x09 { index += 1 }
            guard let separator = current else { break }
            guard separator == UInt8(ascii: ",") else { throw fail("expected \",\" between members") }
            index += 1
            while current == 0x20 || current == 0x09 { index += 1 }
            guard index < bytes.count else { throw fail("a trailing \",\"") }
        }
        skipSpaces()
        guard index == bytes.count else { throw fail("unexpected characters after the dictionary") }
    }

    /// Steps over a member's `=` when the value after it starts with `opening` (`(` for an inner
    /// list, `:` for a byte sequence); false, without moving, otherwise.
    mutating func skipEquals(before opening: UInt8) -> Bool {
        guard current == UInt8(ascii: "="), index + 1 < bytes.count, bytes[index + 1] == opening else { return false }
        index += 1
        return true
    }

    /// A member's value, from just after its key: `=` and an item or inner list, or, without `=`,
    /// `true` with parameters. The range of an inner list written canonically comes with it.
    mutating func memberValue() throws(ParseError) -> (value: StructuredDictionary.Value, canonicalRange: Range<Int>?) {
        guard current == UInt8(ascii: "=") else {
            return (.item(StructuredDictionary.Item(bareItem: .bool(true), parameters: try parameters())), nil)
        }
        index += 1
        guard current == UInt8(ascii: "(") else { return (.item(try item()), nil) }
        let valueStart = index
        canonical = true
        var items: [StructuredDictionary.Item] = []
        let parameters = try innerList { (parser: inout StructuredFieldParser) throws(ParseError) in items.append(try parser.item()) }
        return (.innerList(items, parameters: parameters), canonical ? valueStart..<index : nil)
    }

    /// §4.2.1.2, from its `(`: each item is read by `item`, standing at its first byte; then the
    /// list's parameters are returned. Spacing the serialisation would change clears ``canonical``.
    mutating func innerList(_ item: (inout StructuredFieldParser) throws(ParseError) -> Void) throws(ParseError) -> Parameters {
        var parameters: Parameters = []
        try innerList(item) { (parser: inout StructuredFieldParser) throws(ParseError) in parameters = try parser.parameters() }
        return parameters
    }

    /// The same, with the list's parameters read by `parameters`, standing after the `)`.
    @inline(__always)
    mutating func innerList(
        _ item: (inout StructuredFieldParser) throws(ParseError) -> Void,
        parameters: (inout StructuredFieldParser) throws(ParseError) -> Void
    ) throws(ParseError) {
        index += 1  // "("
        var count = 0
        while index < bytes.count {
            let spacesStart = index
            skipSpaces()
            let spaces = index - spacesStart
            if current == UInt8(ascii: ")") {
                if spaces > 0 { canonical = false }
                index += 1
                return try parameters(&self)
            }
            // Canonically: no space after "(", exactly one between items.
            if spaces != (count == 0 ? 0 : 1) { canonical = false }
            try item(&self)
            count += 1
            guard let next = current, next == 0x20 || next == UInt8(ascii: ")") else {
                throw fail("expected a space or \")\" after an inner list's item")
            }
        }
        throw fail("an inner list without its \")\"")
    }

    /// §4.2.3
    mutating func item() throws(ParseError) -> StructuredDictionary.Item {
        let bareItem = try self.bareItem()
        return StructuredDictionary.Item(bareItem: bareItem, parameters: try parameters())
    }

    /// An item checked by the same grammar as ``item()``, with nothing kept: for items a reader
    /// has no use for (a signature's components past the verifier's limit).
    mutating func skipItem() throws(ParseError) {
        _ = try bareItem()
        try parameters { _, _, _ in }
    }

    /// A member's value checked by the same grammar as ``memberValue()``, with nothing kept: for
    /// members a reader has no use for (a dictionary field's members that no component covers).
    mutating func skipMemberValue() throws(ParseError) {
        guard current == UInt8(ascii: "=") else { return try parameters { _, _, _ in } }
        index += 1
        guard current == UInt8(ascii: "(") else { return try skipItem() }
        try innerList(
            { (parser: inout StructuredFieldParser) throws(ParseError) in try parser.skipItem() },
            parameters: { (parser: inout StructuredFieldParser) throws(ParseError) in try parser.parameters { _, _, _ in } })
    }

    /// §4.2.3.2; a repeated parameter key replaces the earlier value in its place, as RFC 9651 says.
    mutating func parameters() throws(ParseError) -> Parameters {
        var collected: Parameters = []
        // Where each key is in `collected`, once there are too many to search one by one.
        var positions: [String: Int]?
        try parameters { (parser: inout StructuredFieldParser, keyRange: Range<Int>, value: RFC9651BareItem) in
            let key = parser.string(keyRange)
            let existing = positions.map { $0[key] } ?? collected.firstIndex { $0.key == key }
            if let existing {
                parser.canonical = false
                collected[existing].value = value
            } else {
                if collected.isEmpty { collected.reserveCapacity(6) }
                collected.append((key, value))
                if positions != nil {
                    positions![key] = collected.count - 1
                } else if collected.count == SeenKeys.linearLimit {
                    positions = Dictionary(uniqueKeysWithValues: collected.enumerated().map { ($1.key, $0) })
                }
            }
        }
        return collected
    }

    /// §4.2.3.2, handing each parameter as written (its key's range and its value) to `parameter`;
    /// repeated keys are the caller's to settle.
    @inline(__always)
    mutating func parameters(_ parameter: (inout StructuredFieldParser, Range<Int>, RFC9651BareItem) -> Void) throws(ParseError) {
        var count = 0
        while current == UInt8(ascii: ";") {
            count += 1
            if count > limits.parameters { throw fail("more than \(limits.parameters) parameters") }
            index += 1
            if current == 0x20 { canonical = false }
            skipSpaces()
            let key = try self.key()
            var value = RFC9651BareItem.bool(true)
            if current == UInt8(ascii: "=") {
                index += 1
                value = try bareItem()
                if case .bool(true) = value { canonical = false }  // serialised as the bare key
            }
            parameter(&self, key, value)
        }
    }

    /// §4.2.3.3: lcalpha or "*", then lcalpha, digits, "_", "-", ".", "*".
    mutating func key() throws(ParseError) -> Range<Int> {
        guard let first = current, StructuredFieldBytes.isKeyStart(first) else {
            throw fail("a key must start with a lowercase letter or \"*\"")
        }
        let start = index
        index += 1
        while let byte = current, StructuredFieldBytes.isKeyByte(byte) { index += 1 }
        return start..<index
    }

    /// §4.2.3.1
    mutating func bareItem() throws(ParseError) -> RFC9651BareItem {
        guard let first = current else { throw fail("a value is missing") }
        switch first {
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try integerOrDecimal(isDate: false)
        case UInt8(ascii: "\""): return .string(try quotedString())
        case UInt8(ascii: "*"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"): return .token(token())
        case UInt8(ascii: ":"): return .undecodedByteSequence(try byteSequence())
        case UInt8(ascii: "?"): return .bool(try boolean())
        case UInt8(ascii: "@"):
            index += 1
            return try integerOrDecimal(isDate: true)
        case UInt8(ascii: "%"):
            canonical = false  // escapes are written one way only
            return .displayString(try displayString())
        default: throw fail("not the start of any value")
        }
    }

    /// §4.2.4 (and §4.2.9 for dates, which must be integers).
    mutating func integerOrDecimal(isDate: Bool) throws(ParseError) -> RFC9651BareItem {
        var negative = false
        if current == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard let first = current, StructuredFieldBytes.isDigit(first) else { throw fail("a number must start with a digit") }
        let digitsStart = index
        var mantissa: Int64 = 0
        var digits = 0
        var isDecimal = false
        var fractionDigits = 0
        while let byte = current {
            if StructuredFieldBytes.isDigit(byte) {
                mantissa = mantissa * 10 + Int64(byte - UInt8(ascii: "0"))
                digits += 1
                if isDecimal { fractionDigits += 1 }
            } else if byte == UInt8(ascii: "."), !isDecimal, !isDate {
                guard digits <= 12 else { throw fail("a decimal has more than 12 digits before its point") }
                isDecimal = true
            } else {
                break
            }
            index += 1
            if !isDecimal, digits > 15 { throw fail("an integer has more than 15 digits") }
            if isDecimal, digits + 1 > 16 { throw fail("a decimal has more than 16 characters") }
        }
        if negative { mantissa = -mantissa }
        // "007" and "-0" serialise as "7" and "0"; a decimal's trailing zeros are dropped.
        if isDecimal || (first == UInt8(ascii: "0") && (index - digitsStart > 1 || negative)) { canonical = false }
        guard isDecimal else { return isDate ? .date(mantissa) : .integer(mantissa) }
        guard fractionDigits > 0 else { throw fail("a decimal ends with its point") }
        guard fractionDigits <= 3 else { throw fail("a decimal has more than 3 digits after its point") }
        return .decimal(PseudoDecimal(mantissa: Int(mantissa), exponent: -fractionDigits))
    }

    /// §4.2.5
    mutating func quotedString() throws(ParseError) -> String {
        let (range, escaped) = try quotedStringRange()
        return escaped ? unescaped(range) : string(range)
    }

    /// §4.2.5, from its opening quote: the range of the string's contents, and whether they hold
    /// escapes (to be removed before they are the string).
    mutating func quotedStringRange() throws(ParseError) -> (range: Range<Int>, escaped: Bool) {
        index += 1  // the opening quote
        let start = index
        var escaped = false
        // Straight over the buffer: the names and parameters of a signature are mostly strings.
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") { return (start..<(index - 1), escaped) }
            if byte == UInt8(ascii: "\\") {
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "\\") else {
                    throw fail("a string may escape only \" and \\")
                }
                escaped = true
                index += 1
            } else if byte < 0x20 || byte > 0x7E {
                throw fail("a string holds a byte that is not visible ASCII or a space")
            }
        }
        throw fail("a string without its closing quote")
    }

    /// §4.2.6: tchar, ":" and "/" after a letter or "*".
    mutating func token() -> String {
        let start = index
        index += 1
        while let byte = current, StructuredFieldBytes.isTokenByte(byte) { index += 1 }
        return string(start..<index)
    }

    /// §4.2.7: kept encoded, as the library does; decoding is the caller's (``Base64``).
    mutating func byteSequence() throws(ParseError) -> String {
        string(try byteSequenceRange())
    }

    /// §4.2.7, from its opening `:`: the range of the base64 text between the colons.
    mutating func byteSequenceRange() throws(ParseError) -> Range<Int> {
        index += 1  // ":"
        let start = index
        let sextets = Base64.sextets  // the table read once, not once a byte
        while let byte = current, byte != UInt8(ascii: ":") {
            guard sextets[Int(byte)] != 0xFF else { throw fail("a byte sequence holds a character outside base64") }
            index += 1
        }
        guard current == UInt8(ascii: ":") else { throw fail("a byte sequence without its closing \":\"") }
        index += 1
        return start..<(index - 1)
    }

    /// §4.2.8
    mutating func boolean() throws(ParseError) -> Bool {
        index += 1  // "?"
        guard let byte = current, byte == UInt8(ascii: "0") || byte == UInt8(ascii: "1") else {
            throw fail("a boolean must be ?0 or ?1")
        }
        index += 1
        return byte == UInt8(ascii: "1")
    }

    /// §4.2.10: `%"…"`, with non-ASCII bytes as lowercase `%xx`, decoding to valid UTF-8.
    mutating func displayString() throws(ParseError) -> String {
        index += 1  // "%"
        guard current == UInt8(ascii: "\"") else { throw fail("a display string must start with %\"") }
        index += 1
        var decoded: [UInt8] = []
        while let byte = current {
            index += 1
            switch byte {
            case UInt8(ascii: "%"):
                guard index + 1 < bytes.count, let high = Self.lowercaseHex(bytes[index]), let low = Self.lowercaseHex(bytes[index + 1])
                else {
                    throw fail("a display string's %-escape must be two lowercase hex digits")
                }
                decoded.append(high << 4 | low)
                index += 2
            case UInt8(ascii: "\""):
                guard let text = String(validating: decoded, as: UTF8.self) else { throw fail("a display string is not valid UTF-8") }
                return text
            case 0x20...0x7E:
                decoded.append(byte)
            default:
                throw fail("a display string holds a byte that is not visible ASCII or a space")
            }
        }
        throw fail("a display string without its closing quote")
    }

    // MARK: Bytes

    func string(_ range: Range<Int>) -> String {
        if let known = Self.known(UnsafeBufferPointer(rebasing: bytes[range])) { return known }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// The component names and parameter keys nearly every signature holds, and every derived
    /// component's name, as literals: a verifier reads a dozen of them per request, and building
    /// each string from its bytes (a UTF-8 check, then the string) cost more than finding it here.
    /// (``SignatureView`` also finds derived components through it, as strings.)
    static func known(_ text: UnsafeBufferPointer<UInt8>) -> String? {
        // Each name is written twice, as the bytes to compare and as the string to return (a
        // string literal costs nothing to hand out; one made from a `StaticString` is built).
        switch text.count {
        case 3:
            if text.holds("alg") { return "alg" }
            if text.holds("tag") { return "tag" }
            return nil
        case 4:
            if text.holds("date") { return "date" }
            return nil
        case 5:
            if text.holds("@path") { return "@path" }
            if text.holds("keyid") { return "keyid" }
            if text.holds("nonce") { return "nonce" }
            return nil
        case 6:
            if text.holds("@query") { return "@query" }
            return nil
        case 7:
            if text.holds("@method") { return "@method" }
            if text.holds("created") { return "created" }
            if text.holds("expires") { return "expires" }
            if text.holds("@scheme") { return "@scheme" }
            if text.holds("@status") { return "@status" }
            return nil
        case 10:
            if text.holds("@authority") { return "@authority" }
            return nil
        case 11:
            if text.holds("@target-uri") { return "@target-uri" }
            if text.holds("hmac-sha256") { return "hmac-sha256" }
            return nil
        case 12:
            if text.holds("@query-param") { return "@query-param" }
            return nil
        case 14:
            if text.holds("content-digest") { return "content-digest" }
            return nil
        case 15:
            if text.holds("@request-target") { return "@request-target" }
            return nil
        case 17:
            if text.holds("@signature-params") { return "@signature-params" }
            return nil
        default: return nil
        }
    }

    /// Whether two ranges of the value hold the same bytes.
    /// Keys of one dictionary, as byte ranges of the value: compared one by one while there are
    /// few (the usual case, no hashing), and hashed once there are more than ``linearLimit``, so
    /// that a field of thousands of members is read in linear time rather than quadratic.
    struct SeenKeys {
        static let linearLimit = 8
        private var ranges: [Range<Int>] = []
        private var hashed: Set<String>?

        /// Records `key`; false when it was there already.
        mutating func insert(_ key: Range<Int>, of parser: StructuredFieldParser) -> Bool {
            if hashed != nil { return hashed!.insert(parser.string(key)).inserted }
            if ranges.contains(where: { parser.sameBytes($0, key) }) { return false }
            ranges.append(key)
            if ranges.count > Self.linearLimit {
                hashed = Set(ranges.map { parser.string($0) })
                ranges = []
            }
            return true
        }
    }

    func sameBytes(_ lhs: Range<Int>, _ rhs: Range<Int>) -> Bool {
        lhs.count == rhs.count && UnsafeBufferPointer(rebasing: bytes[lhs]).elementsEqual(UnsafeBufferPointer(rebasing: bytes[rhs]))
    }

    /// Whether a range of the value holds `text`'s bytes.
    func bytes(_ range: Range<Int>, equal text: String) -> Bool {
        range.count == text.utf8.count && text.utf8.elementsEqual(UnsafeBufferPointer(rebasing: bytes[range]))
    }

    /// The contents of a string that held escapes (already checked), without the backslashes.
    private func unescaped(_ range: Range<Int>) -> String {
        var result: [UInt8] = []
        result.reserveCapacity(range.count)
        var position = range.lowerBound
        while position < range.upperBound {
            if bytes[position] == UInt8(ascii: "\\") { position += 1 }
            result.append(bytes[position])
            position += 1
        }
        return String(decoding: result, as: UTF8.self)
    }

    private static func lowercaseHex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
