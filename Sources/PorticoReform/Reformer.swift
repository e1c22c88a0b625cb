import Foundation
import SwiftCSV

/// Turns one source's body into a contract's object: parse (bounded), locate each field, convert,
/// check against the contract.
///
/// Pure data in, data out: no I/O, no event loop, so the facade handler calls it on whichever
/// thread the body arrived on, and tests call it directly.
public struct Reformer: Sendable, Hashable {
    public var format: SourceFormat
    public var mappings: [FieldMapping]
    /// CSV only: whether the first line names the columns (then data starts on the second).
    public var csvHeader: Bool
    /// Bodies larger than this are refused without being parsed.
    public var maxBodyBytes: Int

    public init(format: SourceFormat, mappings: [FieldMapping], csvHeader: Bool = false, maxBodyBytes: Int = 1024 * 1024) {
        self.format = format
        self.mappings = mappings
        self.csvHeader = csvHeader
        self.maxBodyBytes = maxBodyBytes
    }

    /// Reforms `body` into an object holding `contract`'s fields, in its order.
    ///
    /// - Parameters:
    ///   - parameters: the request's named values (path segments, query) for ``Locator/parameter(_:)``.
    ///   - partial: whether fields this reformer has no mapping for are left to another source (an
    ///     aggregation's part) rather than reported missing.
    /// - Throws: ``ReformError`` for an oversized or malformed body, a required field missing, a
    ///   conversion that does not apply, or a value of the wrong type.
    public func reform(
        _ body: Data, contract: Contract, parameters: [String: String] = [:], partial: Bool = false
    ) throws(ReformError) -> ReformValue {
        guard body.count <= maxBodyBytes else { throw ReformError(.tooLarge(limit: maxBodyBytes)) }
        let document = try parse(body)
        var fields: [(key: String, value: ReformValue)] = []
        for field in contract.fields {
            guard let mapping = mappings.first(where: { $0.field == field.name }) else {
                if field.required && !partial { throw ReformError(.missingField(field.name)) }
                continue
            }
            guard var value = document.find(mapping.locator, parameters: parameters), value != .null else {
                if field.required { throw ReformError(.missingField(field.name)) }
                continue
            }
            for conversion in mapping.conversions {
                value = try conversion.apply(to: value, field: field.name)
            }
            guard Contract.matches(value, field.type) else {
                throw ReformError(.wrongType(field: field.name, expected: field.type, found: value.kindName))
            }
            if field.type == .integer, case .number(let n) = value { value = .integer(Int64(n)) }
            fields.append((field.name, value))
        }
        return .object(fields)
    }

    private func parse(_ body: Data) throws(ReformError) -> ParsedBody {
        switch format {
        case .json:
            return .json(try ReformValue.readJSON(body))
        case .xml:
            return .xml(try XMLNode.parse(body))
        case .csv:
            guard let text = String(data: body, encoding: .utf8) else {
                throw ReformError(.malformed(format: .csv, detail: "the body is not UTF-8 text"))
            }
            // RFC 4180 quotes come in pairs (a field's opening and closing, or a doubled one inside);
            // an odd count is an unterminated field, which the CSV parser would silently close.
            guard text.utf8.lazy.filter({ $0 == UInt8(ascii: "\"") }).count.isMultiple(of: 2) else {
                throw ReformError(.malformed(format: .csv, detail: "a quoted field is not terminated"))
            }
            let rows: [[String]]
            do {
                let csv = try EnumeratedCSV(string: text, delimiter: .comma, loadColumns: false)
                rows = ([csv.header] + csv.rows).filter { $0 != [""] && !$0.isEmpty }
            } catch {
                throw ReformError(.malformed(format: .csv, detail: "\(error)"))
            }
            if csvHeader {
                guard let header = rows.first else { throw ReformError(.malformed(format: .csv, detail: "no header line")) }
                return .csv(header: header, row: rows.dropFirst().first)
            }
            return .csv(header: nil, row: rows.first)
        }
    }

}

/// A body parsed in its format, ready for locators.
enum ParsedBody {
    case json(ReformValue)
    case xml(XMLNode)
    /// The first data row, and the header when the source has one.
    case csv(header: [String]?, row: [String]?)

    func find(_ locator: Locator, parameters: [String: String]) -> ReformValue? {
        switch (locator, self) {
        case (.fixed(let value), _): return value
        case (.parameter(let name), _): return parameters[name].map(ReformValue.string)
        case (.jsonPointer(let pointer), .json(let root)): return Self.resolve(pointer, in: root)
        case (.xmlPath(let path), .xml(let root)): return root.value(at: path).map(ReformValue.string)
        case (.csvIndex(let index), .csv(_, let row)):
            guard let row, index >= 0, index < row.count else { return nil }
            return .string(row[index])
        case (.csvColumn(let name), .csv(let header, let row)):
            guard let row, let index = header?.firstIndex(of: name), index < row.count else { return nil }
            return .string(row[index])
        default:
            // A locator of another format: the policy reader refuses such a mapping.
            return nil
        }
    }

    /// RFC 6901: `""` is the whole document; each `/`-separated token names a member or, in an
    /// array, an index from 0; `~1` stands for `/` and `~0` for `~`.
    static func resolve(_ pointer: String, in root: ReformValue) -> ReformValue? {
        guard !pointer.isEmpty else { return root }
        guard pointer.hasPrefix("/") else { return nil }
        var value = root
        for raw in pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            let token = raw.contains("~") ? unescape(raw) : String(raw)
            switch value {
            case .object:
                guard let member = value[token] else { return nil }
                value = member
            case .array(let items):
                guard let index = Int(token), index >= 0, index < items.count, token == String(index) else { return nil }
                value = items[index]
            default:
                return nil
            }
        }
        return value
    }

    /// A pointer token's `~1` as `/` and `~0` as `~`, in that order (RFC 6901 §4: `~01` is `~1`).
    private static func unescape(_ token: Substring) -> String {
        var out = ""
        var escaped = false
        for character in token {
            if escaped {
                switch character {
                case "1": out.append("/")
                case "0": out.append("~")
                default: out += "~\(character)"  // not an escape: left as written
                }
                escaped = false
            } else if character == "~" {
                escaped = true
            } else {
                out.append(character)
            }
        }
        if escaped { out.append("~") }
        return out
    }
}
