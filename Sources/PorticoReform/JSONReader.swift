import Foundation

/// Reads an RFC 8259 JSON text into a ``ReformValue``, in one pass over the bytes.
///
/// Its own reader rather than Foundation's `JSONDecoder`: decoding any document through
/// `Decodable` costs a container and a key box per member, and in a facade that answers from one
/// small JSON source the decoding was the largest part of the request's CPU (`bench/facade.sh`).
/// It keeps what the decoder gave: booleans apart from numbers, integers (no fraction or exponent,
/// within `Int64`) apart from other numbers, and an object's members sorted by name (a name given
/// twice keeps its last value). It is strict where the RFC is: no trailing commas, comments, single
/// quotes, leading zeros, bare control characters in strings or lone surrogate escapes; strings
/// must be valid UTF-8; numbers must be finite as `Double`s. Nesting deeper than ``maxDepth`` is
/// refused, so the recursion is bounded whatever the body.
enum JSONReader {
    /// Arrays and objects nested deeper than this are refused.
    static let maxDepth = 256

    /// The value `data` holds, or a description of where and why it is not JSON.
    static func read(_ data: Data) -> Result<ReformValue, Failure> {
        data.withUnsafeBytes { raw in
            var parser = Parser(bytes: raw.assumingMemoryBound(to: UInt8.self))
            do throws(Failure) {
                return .success(try parser.document())
            } catch {
                return .failure(error)
            }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let reason: String
        let offset: Int
        var description: String { "\(reason) at byte \(offset)" }
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        mutating func document() throws(Failure) -> ReformValue {
            skipWhitespace()
            let value = try value(depth: 0)
            skipWhitespace()
            guard index == bytes.count else { throw failure("text after the value") }
            return value
        }

        private func failure(_ reason: String) -> Failure {
            Failure(reason: index < bytes.count ? reason : "unexpected end of the text", offset: index)
        }

        private mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        private func next(is byte: UInt8) -> Bool { index < bytes.count && bytes[index] == byte }

        private mutating func value(depth: Int) throws(Failure) -> ReformValue {
            guard index < bytes.count else { throw failure("a value expected") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .boolean(true))
            case UInt8(ascii: "f"): return try literal("false", .boolean(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw failure("a value expected")
            }
        }

        private mutating func literal(_ word: StaticString, _ value: ReformValue) throws(Failure) -> ReformValue {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { throw failure("\(word) expected") }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
                throw failure("\(word) expected")
            }
            index += count
            return value
        }

        private mutating func object(depth: Int) throws(Failure) -> ReformValue {
            guard depth <= JSONReader.maxDepth else { throw failure("nested deeper than \(JSONReader.maxDepth)") }
            index += 1
            var fields: [(key: String, value: ReformValue)] = []
            skipWhitespace()
            if next(is: UInt8(ascii: "}")) {
                index += 1
                return .object(fields)
            }
            while true {
                skipWhitespace()
                guard next(is: UInt8(ascii: "\"")) else { throw failure("a member name expected") }
                let key = try string()
                skipWhitespace()
                guard next(is: UInt8(ascii: ":")) else { throw failure("':' expected") }
                index += 1
                skipWhitespace()
                fields.append((key, try value(depth: depth)))
                skipWhitespace()
                if next(is: UInt8(ascii: ",")) {
                    index += 1
                } else if next(is: UInt8(ascii: "}")) {
                    index += 1
                    return .object(Self.sorted(fields))
                } else {
                    throw failure("',' or '}' expected")
                }
            }
        }

        /// Members by name; of a name given twice, the later value.
        private static func sorted(_ fields: [(key: String, value: ReformValue)]) -> [(key: String, value: ReformValue)] {
            var ordered = true
            for position in fields.indices.dropFirst() where !(fields[position - 1].key < fields[position].key) {
                ordered = false
                break
            }
            if ordered { return fields }
            let sorted = fields.indices.sorted { a, b in
                fields[a].key == fields[b].key ? a < b : fields[a].key < fields[b].key
            }
            var result: [(key: String, value: ReformValue)] = []
            result.reserveCapacity(fields.count)
            for position in sorted {
                if let last = result.last, last.key == fields[position].key {
                    result[result.count - 1] = fields[position]
                } else {
                    result.append(fields[position])
                }
            }
            return result
        }

        private mutating func array(depth: Int) throws(Failure) -> ReformValue {
            guard depth <= JSONReader.maxDepth else { throw failure("nested deeper than \(JSONReader.maxDepth)") }
            index += 1
            var items: [ReformValue] = []
            skipWhitespace()
            if next(is: UInt8(ascii: "]")) {
                index += 1
                return .array(items)
            }
            while true {
                skipWhitespace()
                items.append(try value(depth: depth))
                skipWhitespace()
                if next(is: UInt8(ascii: ",")) {
                    index += 1
                } else if next(is: UInt8(ascii: "]")) {
                    index += 1
                    return .array(items)
                } else {
                    throw failure("',' or ']' expected")
                }
            }
        }

        /// A string from its opening quote: the bytes between the quotes when there is no escape
        /// (the common case, one copy), else decoded escape by escape.
        private mutating func string() throws(Failure) -> String {
            index += 1
            let start = index
            var ascii = true
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = try Self.text(UnsafeBufferPointer(rebasing: bytes[start..<index]), ascii: ascii, at: start)
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                guard byte >= 0x20 else { throw failure("a control character in a string") }
                if byte >= 0x80 { ascii = false }
                index += 1
            }
            guard index < bytes.count else { throw failure("unterminated string") }
            var buffer = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return try buffer.withUnsafeBufferPointer { decoded throws(Failure) in
                        try Self.text(decoded, ascii: ascii, at: start)
                    }
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { throw failure("unterminated string") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): buffer.append(escape)
                    case UInt8(ascii: "b"): buffer.append(0x08)
                    case UInt8(ascii: "f"): buffer.append(0x0C)
                    case UInt8(ascii: "n"): buffer.append(0x0A)
                    case UInt8(ascii: "r"): buffer.append(0x0D)
                    case UInt8(ascii: "t"): buffer.append(0x09)
                    case UInt8(ascii: "u"):
                        let scalar = try unicodeEscape()
                        if scalar.value >= 0x80 { ascii = false }
                        UTF8.encode(scalar) { buffer.append($0) }
                    default:
                        index -= 1
                        throw failure("an unknown escape")
                    }
                default:
                    guard byte >= 0x20 else { throw failure("a control character in a string") }
                    if byte >= 0x80 { ascii = false }
                    buffer.append(byte)
                    index += 1
                }
            }
            throw failure("unterminated string")
        }

        /// The scalar of `\uXXXX` (the `\u` read), joining a surrogate pair written as two escapes.
        private mutating func unicodeEscape() throws(Failure) -> Unicode.Scalar {
            let first = try hex4()
            if (0xDC00...0xDFFF).contains(first) { throw failure("a lone low surrogate") }
            guard (0xD800...0xDBFF).contains(first) else { return Unicode.Scalar(first)! }
            guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw failure("a lone high surrogate")
            }
            index += 2
            let second = try hex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw failure("a lone high surrogate") }
            return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))!
        }

        private mutating func hex4() throws(Failure) -> UInt32 {
            guard bytes.count - index >= 4 else { throw failure("four hex digits expected") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw failure("four hex digits expected")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// Valid UTF-8 as a `String`; anything else is not JSON text (RFC 8259 §8.1).
        private static func text(_ utf8: UnsafeBufferPointer<UInt8>, ascii: Bool, at offset: Int) throws(Failure) -> String {
            let text = String(decoding: utf8, as: UTF8.self)
            // Decoding replaces an invalid sequence with U+FFFD, which changes the bytes.
            guard ascii || text.utf8.elementsEqual(utf8) else { throw Failure(reason: "a string that is not UTF-8", offset: offset) }
            return text
        }

        private func isDigit(_ position: Int) -> Bool {
            position < bytes.count && bytes[position] >= UInt8(ascii: "0") && bytes[position] <= UInt8(ascii: "9")
        }

        private mutating func number() throws(Failure) -> ReformValue {
            let start = index
            let negative = bytes[index] == UInt8(ascii: "-")
            if negative { index += 1 }
            guard isDigit(index) else { throw failure("a digit expected") }
            // Accumulated negatively, so that Int64.min fits; nil once it overflows.
            var integer: Int64? = 0
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                while isDigit(index) {
                    if let value = integer {
                        let (times, overflow) = value.multipliedReportingOverflow(by: 10)
                        let (sum, overflow2) = times.subtractingReportingOverflow(Int64(bytes[index] - UInt8(ascii: "0")))
                        integer = overflow || overflow2 ? nil : sum
                    }
                    index += 1
                }
            }
            var integral = true
            if next(is: UInt8(ascii: ".")) {
                integral = false
                index += 1
                guard isDigit(index) else { throw failure("a digit expected") }
                while isDigit(index) { index += 1 }
            }
            if next(is: UInt8(ascii: "e")) || next(is: UInt8(ascii: "E")) {
                integral = false
                index += 1
                if next(is: UInt8(ascii: "+")) || next(is: UInt8(ascii: "-")) { index += 1 }
                guard isDigit(index) else { throw failure("a digit expected") }
                while isDigit(index) { index += 1 }
            }
            if integral, let integer {
                if negative { return .integer(integer) }
                if integer != .min { return .integer(-integer) }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            guard let number = Double(text), number.isFinite else {
                throw Failure(reason: "a number out of range", offset: start)
            }
            return .number(number)
        }
    }
}
