import Foundation

extension Conversion {
    /// Applies the conversion; an error names the field, the conversion and what it was given.
    func apply(to value: ReformValue, field: String) throws(ReformError) -> ReformValue {
        func fail() -> ReformError {
            ReformError(.conversionFailed(field: field, conversion: rawValue, found: value.json))
        }
        switch self {
        case .number:
            switch value {
            case .number, .integer: return value
            case .string(let text):
                guard let number = Self.decimal(text) else { throw fail() }
                return .number(number)
            default: throw fail()
            }
        case .integer:
            switch value {
            case .integer: return value
            case .number(let n):
                guard n == n.rounded(), abs(n) < 1e15 else { throw fail() }
                return .integer(Int64(n))
            case .string(let text):
                guard let n = Int64(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw fail() }
                return .integer(n)
            default: throw fail()
            }
        case .string:
            switch value {
            case .string: return value
            case .number(let n): return .string(ReformValue.format(n))
            case .integer(let n): return .string(String(n))
            case .boolean(let b): return .string(b ? "true" : "false")
            default: throw fail()
            }
        case .boolean:
            switch value {
            case .boolean: return value
            case .integer(let n) where n == 0 || n == 1: return .boolean(n == 1)
            case .string(let text):
                switch text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased() {
                case "true", "1", "yes": return .boolean(true)
                case "false", "0", "no": return .boolean(false)
                default: throw fail()
                }
            default: throw fail()
            }
        case .trim:
            guard case .string(let text) = value else { return value }
            return .string(text.trimmingCharacters(in: .whitespacesAndNewlines))
        case .stripQuotes:
            guard case .string(let text) = value, text.count >= 2, let first = text.first, first == "\"" || first == "'",
                text.last == first
            else { return value }
            return .string(String(text.dropFirst().dropLast()))
        case .percentToNumber:
            switch value {
            case .number, .integer: return value
            case .string(let text):
                var trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if trimmed.hasSuffix("%") { trimmed.removeLast() }
                guard let number = Self.decimal(trimmed) else { throw fail() }
                return .number(number)
            default: throw fail()
            }
        case .numberToPercent:
            switch value {
            case .number(let n): return .string(ReformValue.format(n) + "%")
            case .integer(let n): return .string(String(n) + "%")
            case .string(let text):
                let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if trimmed.hasSuffix("%"), Self.decimal(String(trimmed.dropLast())) != nil { return .string(trimmed) }
                guard let number = Self.decimal(trimmed) else { throw fail() }
                return .string(ReformValue.format(number) + "%")
            default: throw fail()
            }
        case .lowercase:
            guard case .string(let text) = value else { return value }
            return .string(text.lowercased())
        case .uppercase:
            guard case .string(let text) = value else { return value }
            return .string(text.uppercased())
        }
    }

    /// A finite decimal number in plain notation (`-2.92`, `+530.12`, `1e3`); not `nan`, `inf`,
    /// hexadecimal, or anything with a unit.
    static func decimal(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty,
            trimmed.unicodeScalars.allSatisfy({ "0123456789.-+eE".unicodeScalars.contains($0) }),
            let number = Double(trimmed), number.isFinite
        else { return nil }
        return number
    }
}
