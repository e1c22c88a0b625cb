import Foundation
import Yams

/// Collects diagnostics while a policy is read; one per load, never shared across threads.
final class DiagnosticSink {
    private(set) var diagnostics: [PolicyDiagnostic] = []
    private(set) var warnings: [PolicyDiagnostic] = []

    func error(_ diagnostic: PolicyDiagnostic) { diagnostics.append(diagnostic) }
    func warning(_ diagnostic: PolicyDiagnostic) { warnings.append(diagnostic) }
}

/// A YAML node together with where it came from: the file, its key path and the sink that records
/// mistakes. Every typed accessor reports what it expected when the node does not fit, and returns
/// `nil` so the caller can go on reading the rest of the document.
struct PolicyValue {
    let node: Node
    let file: String
    let path: [String]
    let sink: DiagnosticSink

    var keyPath: String { path.joined(separator: ".") }
    var line: Int? { node.mark?.line }

    func error(_ message: String) {
        sink.error(PolicyDiagnostic(file: file, line: line, keyPath: keyPath, message: message))
    }

    func warning(_ message: String) {
        sink.warning(PolicyDiagnostic(file: file, line: line, keyPath: keyPath, message: message))
    }

    func child(_ key: String, _ node: Node) -> PolicyValue {
        PolicyValue(node: node, file: file, path: path + [key], sink: sink)
    }

    private var kindName: String {
        switch node {
        case .scalar: "a scalar"
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .alias: "an alias"
        }
    }

    /// The node as a mapping whose keys must all be in `known`; unknown and repeated keys are reported.
    func fields(known: [String]) -> PolicyFields? {
        guard let entries = mappingEntries() else { return nil }
        var values: [String: PolicyValue] = [:]
        for (key, value) in entries {
            if !known.contains(key) {
                value.error("unknown key \"\(key)\"; expected one of: \(known.joined(separator: ", "))")
                continue
            }
            values[key] = value
        }
        return PolicyFields(owner: self, values: values)
    }

    /// The node as a mapping of free-form names (backend names, service names, versions).
    func mappingEntries() -> [(key: String, value: PolicyValue)]? {
        guard case .mapping(let mapping) = node else {
            error("expected a mapping, found \(kindName)")
            return nil
        }
        // Yams already refuses a mapping with a repeated key, so keys are unique here.
        var result: [(key: String, value: PolicyValue)] = []
        for (keyNode, valueNode) in mapping {
            guard case .scalar(let scalar) = keyNode else {
                let key = PolicyValue(node: keyNode, file: file, path: path, sink: sink)
                key.error("expected a plain key, found \(key.kindName)")
                continue
            }
            let key = scalar.string
            result.append((key, child(key, valueNode)))
        }
        return result
    }

    /// The keys of this mapping (none if it is not one), without reporting anything.
    func mappingKeys() -> [String] {
        guard case .mapping(let mapping) = node else { return [] }
        return mapping.compactMap { $0.key.scalar?.string }
    }

    /// The value under `key` of this mapping, without reporting anything (for locating a
    /// diagnostic found later, such as a duplicate route).
    func value(forKey key: String) -> PolicyValue? {
        guard case .mapping(let mapping) = node else { return nil }
        for (keyNode, valueNode) in mapping where keyNode.scalar?.string == key {
            return child(key, valueNode)
        }
        return nil
    }

    /// Whether the value is a mapping, without reporting anything when not.
    var isMapping: Bool {
        if case .mapping = node { return true }
        return false
    }

    /// Whether the value is a list, without reporting anything when not.
    var isSequence: Bool {
        if case .sequence = node { return true }
        return false
    }

    func sequence() -> [PolicyValue]? {
        guard case .sequence(let sequence) = node else {
            error("expected a list, found \(kindName)")
            return nil
        }
        return sequence.enumerated().map { child(String($0.offset), $0.element) }
    }

    private var scalar: Node.Scalar? {
        if case .scalar(let scalar) = node { return scalar }
        return nil
    }

    /// Whether the value is the plain word `word` (`off`, say), without reporting anything when not.
    func isWord(_ word: String) -> Bool {
        scalar.map { $0.style == .plain && $0.string == word } ?? false
    }

    func string() -> String? {
        guard let scalar else {
            error("expected a string, found \(kindName)")
            return nil
        }
        return scalar.string
    }

    func nonEmptyString() -> String? {
        guard let value = string() else { return nil }
        if value.isEmpty {
            error("expected a non-empty string")
            return nil
        }
        return value
    }

    /// A file path, resolved against the directory of the policy file that names it.
    func filePath() -> String? {
        guard let path = nonEmptyString() else { return nil }
        let resolved = path.hasPrefix("/") ? path : ((file as NSString).deletingLastPathComponent as NSString).appendingPathComponent(path)
        return (resolved as NSString).standardizingPath
    }

    func int(in range: ClosedRange<Int>) -> Int? {
        guard let scalar, scalar.style == .plain, let value = Int(scalar.string) else {
            error("expected an integer, found \(describe())")
            return nil
        }
        guard range.contains(value) else {
            error("expected an integer in \(range.lowerBound)...\(range.upperBound), found \(value)")
            return nil
        }
        return value
    }

    /// A string that must be one of `cases` (by raw value).
    func oneOf<T: RawRepresentable>(_ cases: [T]) -> T? where T.RawValue == String {
        guard let text = string() else { return nil }
        guard let match = cases.first(where: { $0.rawValue == text }) else {
            error("expected one of \(cases.map(\.rawValue).joined(separator: ", ")), found \(describe())")
            return nil
        }
        return match
    }

    func bool() -> Bool? {
        guard let scalar, scalar.style == .plain, let value = Bool(scalar.string) else {
            error("expected true or false, found \(describe())")
            return nil
        }
        return value
    }

    /// A positive duration such as `250ms`, `10s`, `5m`, `1h`; a bare number means seconds.
    func duration() -> Duration? {
        guard let text = scalar?.string, let duration = PolicyValue.parseDuration(text), duration > .zero else {
            error("expected a positive duration such as 500ms, 10s or 5m, found \(describe())")
            return nil
        }
        return duration
    }

    /// A positive byte count: a plain integer or one with a unit (`16KiB`, `1MiB`, `1MB`).
    /// A size such as `16384`, `16KiB` or `1MiB`; `0` too when `allowingZero` (a limit it turns off).
    func byteCount(allowingZero: Bool = false) -> Int? {
        guard let text = scalar?.string, let count = PolicyValue.parseByteCount(text), count > 0 || (allowingZero && count == 0) else {
            error("expected a \(allowingZero ? "" : "positive ")size such as 16384, 16KiB or 1MiB, found \(describe())")
            return nil
        }
        return count
    }

    func describe() -> String {
        switch node {
        case .scalar(let scalar):
            scalar.style == .plain ? "\(scalar.string)" : "\"\(scalar.string)\""
        default:
            kindName
        }
    }

    /// `nil` for text that is not a number with a unit, and for a number of milliseconds that does
    /// not fit in 64 bits (`600000000000000000s`), which would otherwise trap on conversion.
    static func parseDuration(_ text: String) -> Duration? {
        let units: [(suffix: String, scale: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        let scale = units.first { text.hasSuffix($0.suffix) }
        guard let number = Double(text.dropLast(scale?.suffix.count ?? 0)),
            let milliseconds = Int64(exactly: (number * (scale?.scale ?? 1) * 1000).rounded())
        else { return nil }
        return .milliseconds(milliseconds)
    }

    static func parseByteCount(_ text: String) -> Int? {
        let units: [(suffix: String, scale: Int)] = [
            ("KiB", 1024), ("MiB", 1024 * 1024), ("GiB", 1024 * 1024 * 1024),
            ("KB", 1000), ("MB", 1_000_000), ("GB", 1_000_000_000),
        ]
        for unit in units where text.hasSuffix(unit.suffix) {
            guard let number = Int(text.dropLast(unit.suffix.count)) else { return nil }
            let (product, overflow) = number.multipliedReportingOverflow(by: unit.scale)
            return overflow ? nil : product
        }
        return Int(text)
    }
}

/// The known keys of one mapping, read one at a time; a missing required key is reported against
/// the mapping itself.
struct PolicyFields {
    let owner: PolicyValue
    let values: [String: PolicyValue]

    subscript(_ key: String) -> PolicyValue? { values[key] }

    func required<T>(_ key: String, _ read: (PolicyValue) -> T?) -> T? {
        guard let value = values[key] else {
            owner.error("missing required key \"\(key)\"")
            return nil
        }
        return read(value)
    }

    /// Reads `key` if present; when it is absent or malformed the default is used (the malformed
    /// case has already been reported, so the load fails anyway).
    func optional<T>(_ key: String, default defaultValue: T, _ read: (PolicyValue) -> T?) -> T {
        guard let value = values[key] else { return defaultValue }
        return read(value) ?? defaultValue
    }

    func optional<T>(_ key: String, _ read: (PolicyValue) -> T?) -> T? {
        guard let value = values[key] else { return nil }
        return read(value)
    }
}
