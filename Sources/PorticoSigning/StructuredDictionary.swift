import RawStructuredFieldValues

/// The one parser of structured-field dictionaries (RFC 9651 §4.2.2) in this module: what
/// `Signature-Input`, `Signature`, `Content-Digest` and a `;key=` component's field are read with.
///
/// **Why not the structured-headers library's parser.** Its dictionary parser keeps the last of
/// two members with the same key, as RFC 9651 says; a verifier must instead refuse a repeated label,
/// or a client could hide a second signature behind the first. Finding repeats used to take a
/// second, hand-written scan of the same bytes, and two parsers of one field can disagree, which is
/// a security risk of its own. This one pass refuses repeats as it meets them. It also runs over
/// the field's bytes in place, where the library's generic parser, called across modules, ran
/// unspecialised (a witness call per byte).
///
/// Values are the library's bare items (`RFC9651BareItem`), so the module and the client library
/// keep one vocabulary, in plain arrays rather than the library's ordered maps, which cost an
/// allocation per growth step. Its results are checked against the library's parser on every
/// input the property test generates.
struct StructuredDictionary {
    /// An item with its parameters, in the order written (a repeated key keeps its first place and
    /// its last value, as RFC 9651 says).
    struct Item {
        var bareItem: RFC9651BareItem
        var parameters: [(key: String, value: RFC9651BareItem)]
    }

    /// A member's value.
    enum Value {
        case item(Item)
        case innerList([Item], parameters: [(key: String, value: RFC9651BareItem)])
    }

    /// The members in order, each with its text as received when that text is already the member's
    /// canonical serialisation (RFC 9651 §4.1), else nil; the text is kept for inner lists only.
    ///
    /// A verifier rebuilds `@signature-params` from the `Signature-Input` member it parsed. When
    /// the signer wrote the member canonically, as signers do, the received text is that line, and
    /// copying it saves serialising the list again. The parser tracks what serialising would change
    /// (extra spaces, `=?1`, leading zeros, decimals, display strings, repeated parameters) and
    /// keeps no text when it sees any of it; the property test checks every kept text against the
    /// serialiser.
    var members: [(key: String, value: Value, canonicalRange: Range<Int>?)] = []

    /// The field value parsed: the canonical texts are slices of it (no copy).
    private(set) var source = ""

    /// The member under `key` with its canonical text, a slice of the field's value (see
    /// ``members``), found in one search.
    func member(_ key: String) -> (value: Value, canonicalText: Substring?)? {
        guard let member = members.first(where: { $0.key == key }) else { return nil }
        return (member.value, member.canonicalRange.map(slice))
    }

    /// The canonical text of the member under `key`; see ``member(_:)``.
    func canonicalText(of key: String) -> Substring? {
        member(key)?.canonicalText
    }

    private func slice(_ range: Range<Int>) -> Substring {
        let utf8 = source.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        return Substring(utf8[start..<utf8.index(start, offsetBy: range.count)])
    }

    /// Why a value is not a dictionary, and at which byte.
    struct ParseError: Error, CustomStringConvertible {
        var reason: String
        var offset: Int
        /// Set when the reason is a key that occurs twice at the top level.
        var duplicateKey: String?
        var description: String { "\(reason) (at byte \(offset))" }
    }

    /// The member under `key`.
    subscript(key: String) -> Value? {
        members.first { $0.key == key }?.value
    }

    /// Parses a whole field value, as received (lines already joined with ", ").
    ///
    /// Throws ``ParseError`` for anything RFC 9651 rejects, and for a key that occurs twice at the
    /// top level (its `duplicateKey` is then set).
    static func parse(_ value: String) throws(ParseError) -> StructuredDictionary {
        var value = value
        var result: Result<StructuredDictionary, ParseError> = value.withUTF8 { bytes in
            var parser = Parser(bytes: bytes)
            do throws(ParseError) {
                return .success(try parser.dictionaryField())
            } catch {
                return .failure(error)
            }
        }
        if case .success(var dictionary) = result {
            dictionary.source = value
            result = .success(dictionary)
        }
        return try result.get()
    }
}

/// RFC 9651 §4.2, the parts a dictionary needs, over a buffer of bytes.
private struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    /// False once the value being read holds anything its serialisation would write differently;
    /// see ``StructuredDictionary/members``.
    var canonical = true

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func fail(_ reason: String) -> StructuredDictionary.ParseError {
        StructuredDictionary.ParseError(reason: reason, offset: index)
    }

    private mutating func skipSpaces() {
        while current == 0x20 { index += 1 }
    }

    /// §4.2: leading and trailing spaces around the whole value, nothing else after it.
    mutating func dictionaryField() throws(StructuredDictionary.ParseError) -> StructuredDictionary {
        skipSpaces()
        let dictionary = try self.dictionary()
        skipSpaces()
        guard index == bytes.count else { throw fail("unexpected characters after the dictionary") }
        return dictionary
    }

    /// §4.2.2, except that a repeated key fails instead of replacing the earlier member.
    private mutating func dictionary() throws(StructuredDictionary.ParseError) -> StructuredDictionary {
        var dictionary = StructuredDictionary()
        dictionary.members.reserveCapacity(2)
        while index < bytes.count {
            let keyStart = index
            let key = try self.key()
            if dictionary.members.contains(where: { $0.key == key }) {
                index = keyStart
                var error = fail("the key \"\(key)\" occurs more than once")
                error.duplicateKey = key
                throw error
            }
            let member: StructuredDictionary.Value
            var text: Range<Int>?
            if current == UInt8(ascii: "=") {
                index += 1
                let valueStart = index
                canonical = true
                member = try itemOrInnerList()
                if case .innerList = member, canonical { text = valueStart..<index }
            } else {
                member = .item(StructuredDictionary.Item(bareItem: .bool(true), parameters: try parameters()))
            }
            dictionary.members.append((key, member, text))
            while current == 0x20 || current == 0x09 { index += 1 }
            guard let separator = current else { return dictionary }
            guard separator == UInt8(ascii: ",") else { throw fail("expected \",\" between members") }
            index += 1
            while current == 0x20 || current == 0x09 { index += 1 }
            guard index < bytes.count else { throw fail("a trailing \",\"") }
        }
        return dictionary
    }

    private mutating func itemOrInnerList() throws(StructuredDictionary.ParseError) -> StructuredDictionary.Value {
        guard current == UInt8(ascii: "(") else { return .item(try item()) }
        index += 1  // "("
        var items: [StructuredDictionary.Item] = []
        items.reserveCapacity(8)
        while index < bytes.count {
            let spacesStart = index
            skipSpaces()
            let spaces = index - spacesStart
            if current == UInt8(ascii: ")") {
                if spaces > 0 { canonical = false }
                index += 1
                return .innerList(items, parameters: try parameters())
            }
            // Canonically: no space after "(", exactly one between items.
            if spaces != (items.isEmpty ? 0 : 1) { canonical = false }
            items.append(try item())
            guard let next = current, next == 0x20 || next == UInt8(ascii: ")") else {
                throw fail("expected a space or \")\" after an inner list's item")
            }
        }
        throw fail("an inner list without its \")\"")
    }

    /// §4.2.3
    private mutating func item() throws(StructuredDictionary.ParseError) -> StructuredDictionary.Item {
        let bareItem = try self.bareItem()
        return StructuredDictionary.Item(bareItem: bareItem, parameters: try parameters())
    }

    /// §4.2.3.2; a repeated parameter key replaces the earlier value in its place, as RFC 9651 says.
    private mutating func parameters() throws(StructuredDictionary.ParseError) -> [(key: String, value: RFC9651BareItem)] {
        var parameters: [(key: String, value: RFC9651BareItem)] = []
        while current == UInt8(ascii: ";") {
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
            if let existing = parameters.firstIndex(where: { $0.key == key }) {
                canonical = false
                parameters[existing].value = value
            } else {
                if parameters.isEmpty { parameters.reserveCapacity(6) }
                parameters.append((key, value))
            }
        }
        return parameters
    }

    /// §4.2.3.3: lcalpha or "*", then lcalpha, digits, "_", "-", ".", "*".
    private mutating func key() throws(StructuredDictionary.ParseError) -> String {
        guard let first = current, StructuredFieldBytes.isKeyStart(first) else {
            throw fail("a key must start with a lowercase letter or \"*\"")
        }
        let start = index
        index += 1
        while let byte = current, StructuredFieldBytes.isKeyByte(byte) { index += 1 }
        return string(start..<index)
    }

    /// §4.2.3.1
    private mutating func bareItem() throws(StructuredDictionary.ParseError) -> RFC9651BareItem {
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
    private mutating func integerOrDecimal(isDate: Bool) throws(StructuredDictionary.ParseError) -> RFC9651BareItem {
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
    private mutating func quotedString() throws(StructuredDictionary.ParseError) -> String {
        index += 1  // the opening quote
        let start = index
        var escaped = false
        while let byte = current {
            index += 1
            switch byte {
            case UInt8(ascii: "\\"):
                guard let next = current, next == UInt8(ascii: "\"") || next == UInt8(ascii: "\\") else {
                    throw fail("a string may escape only \" and \\")
                }
                escaped = true
                index += 1
            case UInt8(ascii: "\""):
                return escaped ? unescaped(start..<(index - 1)) : string(start..<(index - 1))
            case 0x20...0x7E:
                continue
            default:
                throw fail("a string holds a byte that is not visible ASCII or a space")
            }
        }
        throw fail("a string without its closing quote")
    }

    /// §4.2.6: tchar, ":" and "/" after a letter or "*".
    private mutating func token() -> String {
        let start = index
        index += 1
        while let byte = current, StructuredFieldBytes.isTokenByte(byte) { index += 1 }
        return string(start..<index)
    }

    /// §4.2.7: kept encoded, as the library does; decoding is the caller's (``Base64``).
    private mutating func byteSequence() throws(StructuredDictionary.ParseError) -> String {
        index += 1  // ":"
        let start = index
        while let byte = current, byte != UInt8(ascii: ":") {
            guard StructuredFieldBytes.isBase64Byte(byte) else { throw fail("a byte sequence holds a character outside base64") }
            index += 1
        }
        guard current == UInt8(ascii: ":") else { throw fail("a byte sequence without its closing \":\"") }
        index += 1
        return string(start..<(index - 1))
    }

    /// §4.2.8
    private mutating func boolean() throws(StructuredDictionary.ParseError) -> Bool {
        index += 1  // "?"
        guard let byte = current, byte == UInt8(ascii: "0") || byte == UInt8(ascii: "1") else {
            throw fail("a boolean must be ?0 or ?1")
        }
        index += 1
        return byte == UInt8(ascii: "1")
    }

    /// §4.2.10: `%"…"`, with non-ASCII bytes as lowercase `%xx`, decoding to valid UTF-8.
    private mutating func displayString() throws(StructuredDictionary.ParseError) -> String {
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

    private func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
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
