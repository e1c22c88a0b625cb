import Foundation

/// A JSON value as a reformer reads it from a source and writes it into a contract.
///
/// Its own type rather than `Any` from `JSONSerialization`: on Linux a parsed `true` and a parsed
/// `1` are both `NSNumber`, and a contract must tell a boolean from a number. Objects keep their
/// keys in order, so a contract's output lists its fields as the contract does.
public enum ReformValue: Sendable, Hashable {
    case string(String)
    case number(Double)
    case integer(Int64)
    case boolean(Bool)
    case object([(key: String, value: ReformValue)])
    case array([ReformValue])
    case null

    public static func == (lhs: ReformValue, rhs: ReformValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.integer(let a), .number(let b)), (.number(let b), .integer(let a)): Double(a) == b
        case (.boolean(let a), .boolean(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.null, .null): true
        case (.object(let a), .object(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let s): hasher.combine(s)
        case .number(let n): hasher.combine(n)
        case .integer(let n): hasher.combine(Double(n))
        case .boolean(let b): hasher.combine(b)
        case .array(let a): hasher.combine(a)
        case .null: hasher.combine(0)
        case .object(let fields):
            for field in fields {
                hasher.combine(field.key)
                hasher.combine(field.value)
            }
        }
    }

    /// The member named `key` of an object.
    public subscript(key: String) -> ReformValue? {
        guard case .object(let fields) = self else { return nil }
        return fields.first { $0.key == key }?.value
    }

    /// What the value is, as an error message names it.
    public var kindName: String {
        switch self {
        case .string: "string"
        case .number: "number"
        case .integer: "integer"
        case .boolean: "boolean"
        case .object: "object"
        case .array: "array"
        case .null: "null"
        }
    }

    /// The value as JSON text, object members in their order.
    public var json: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// The value as UTF-8 JSON bytes.
    public var jsonData: Data { Data(json.utf8) }

    func write(to out: inout String) {
        switch self {
        case .string(let s): Self.writeString(s, to: &out)
        case .number(let n): out += Self.format(n)
        case .integer(let n): out += String(n)
        case .boolean(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let fields):
            out += "{"
            for (index, field) in fields.enumerated() {
                if index > 0 { out += "," }
                Self.writeString(field.key, to: &out)
                out += ":"
                field.value.write(to: &out)
            }
            out += "}"
        }
    }

    /// A number as JSON writes it: integral values without a fraction (`545` not `545.0`), others
    /// in Swift's shortest round-tripping form (`530.12`). Infinities and NaN have no JSON form and
    /// never reach here: conversions refuse them.
    static func format(_ number: Double) -> String {
        if number == number.rounded(), abs(number) < 1e15 { return String(Int64(number)) }
        return String(number)
    }

    /// RFC 8259 §7: quote, backslash and control characters escaped; everything else as is (UTF-8).
    static func writeString(_ string: String, to out: inout String) {
        out += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
