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

    public var isDerived: Bool { name.hasPrefix("@") }

    public func parameter(_ key: String) -> RFC9651BareItem? {
        parameters.first { $0.key == key }?.value
    }

    /// The identifier as it appears in a signature base line and in `Signature-Input`:
    /// `"@query-param";name="Pet"`.
    public var description: String { serialized }

    var serialized: String {
        // The common case, a bare name of token characters, needs no escaping and no serializer.
        if parameters.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            return "\"" + name + "\""
        }
        var serializer = StructuredFieldValueSerializer()
        // Only a parameter value the serializer refuses (an out-of-range integer, a string with
        // control characters) can fail; those never come out of the parser or the static helpers.
        guard let bytes = try? serializer.writeItemFieldValue(item) else { return "\"" + name + "\"" }
        return String(decoding: bytes, as: UTF8.self)
    }

    var item: Item {
        var map = OrderedMap<String, RFC9651BareItem>()
        for (key, value) in parameters { map[key] = value }
        return Item(bareItem: .string(name), parameters: map)
    }

    init(item: Item) throws(SigningError) {
        guard case .string(let name) = item.rfc9651BareItem else {
            throw .invalidComponent("component identifiers must be quoted strings")
        }
        guard !name.isEmpty, name == name.lowercased() else {
            throw .invalidComponent("\"\(name)\" must be lowercase")
        }
        self.name = name
        self.parameters = item.rfc9651Parameters.map { ($0.0, $0.1) }
    }

    /// Same name and same parameters in the same order: the same serialisation.
    public static func == (lhs: ComponentIdentifier, rhs: ComponentIdentifier) -> Bool {
        lhs.name == rhs.name && lhs.parameters.elementsEqual(rhs.parameters) { $0.key == $1.key && $0.value == $1.value }
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
