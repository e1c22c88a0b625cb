import RawStructuredFieldValues

/// One covered component of a signature (RFC 9421 §2): a lowercase name, derived (`@method`) or a
/// header field (`content-digest`), with its parameters (`;name="q"`, `;key="sha-256"`, `;bs`).
public struct ComponentIdentifier: Hashable, Sendable, CustomStringConvertible {
    public var name: String
    /// In the order they were written; the order is part of the identifier's serialisation.
    public var parameters: [(key: String, value: RFC9651BareItem)]

    public init(_ name: String, parameters: [(key: String, value: RFC9651BareItem)] = []) {
        self.name = name
        self.parameters = parameters
    }

    public static let method = ComponentIdentifier("@method")
    public static let targetURI = ComponentIdentifier("@target-uri")
    public static let authority = ComponentIdentifier("@authority")
    public static let scheme = ComponentIdentifier("@scheme")
    public static let requestTarget = ComponentIdentifier("@request-target")
    public static let path = ComponentIdentifier("@path")
    public static let query = ComponentIdentifier("@query")

    /// `@query-param;name="…"` for the query parameter `name`, given unencoded (`page size`); the
    /// identifier carries it encoded (`page%20size`) as RFC 9421 §2.2.8 requires.
    public static func queryParameter(_ name: String) -> ComponentIdentifier {
        ComponentIdentifier("@query-param", parameters: [("name", .string(QueryParameters.encode(Array(name.utf8))))])
    }

    /// A header field, by name (lowercased here).
    public static func field(_ name: String) -> ComponentIdentifier {
        ComponentIdentifier(name.lowercased())
    }

    public var isDerived: Bool { name.utf8.first == UInt8(ascii: "@") }

    public func parameter(_ key: String) -> RFC9651BareItem? {
        parameters.first { $0.key == key }?.value
    }

    /// The identifier as it appears in a signature base line and in `Signature-Input`:
    /// `"@query-param";name="Pet"`.
    public var description: String { serialized }

    var serialized: String {
        var bytes: [UInt8] = []
        // Only a name or parameter the serializer refuses (a control character, an out-of-range
        // integer) can fail; those never come out of the parser or the static helpers.
        guard (try? write(to: &bytes)) != nil else { return "\"" + name + "\"" }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the identifier's serialisation: the name as a structured-field string, then its
    /// parameters.
    func write(to bytes: inout [UInt8]) throws(SigningError) {
        do {
            try StructuredFieldWriter.appendString(name, to: &bytes)
            if !parameters.isEmpty { try StructuredFieldWriter.appendParameters(parameters, to: &bytes) }
        } catch {
            throw .invalidComponent("\"\(name)\" cannot be serialised as a component identifier")
        }
    }

    init(parsed item: consuming StructuredDictionary.Item) throws(SigningError) {
        guard case .string(let name) = item.bareItem else {
            throw .invalidComponent("component identifiers must be quoted strings")
        }
        var bytes = name
        let hasUppercase = bytes.withUTF8 { $0.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") } }
        guard !name.isEmpty, !hasUppercase else {
            throw .invalidComponent("\"\(name)\" must be lowercase")
        }
        self.name = name
        self.parameters = item.parameters
    }

    /// Same name and same parameters in the same order: the same serialisation.
    public static func == (lhs: ComponentIdentifier, rhs: ComponentIdentifier) -> Bool {
        guard lhs.name == rhs.name, lhs.parameters.count == rhs.parameters.count else { return false }
        return lhs.parameters.isEmpty || lhs.parameters.elementsEqual(rhs.parameters) { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(parameters.count)
        for (key, value) in parameters {
            hasher.combine(key)
            hasher.combine(value)
        }
    }
}
