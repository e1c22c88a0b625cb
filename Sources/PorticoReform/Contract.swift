/// What one facade version promises its clients: an object with these fields, in this order.
///
/// A reformed result is checked against it before anyone sees it, so a source that changed shape
/// gives an error (and the facade falls back) instead of a half-filled object.
public struct Contract: Sendable, Hashable {
    public var fields: [Field]

    public init(fields: [Field]) {
        self.fields = fields
    }

    public struct Field: Sendable, Hashable {
        public var name: String
        public var type: FieldType
        public var required: Bool

        public init(name: String, type: FieldType, required: Bool = true) {
            self.name = name
            self.type = type
            self.required = required
        }
    }

    /// Whether `value` is of `type` as JSON sees it; an integer is also a number.
    public static func matches(_ value: ReformValue, _ type: FieldType) -> Bool {
        switch (type, value) {
        case (.string, .string), (.number, .number), (.number, .integer), (.integer, .integer), (.boolean, .boolean),
            (.object, .object), (.array, .array):
            true
        case (.integer, .number(let n)): n == n.rounded() && abs(n) < 1e15
        default: false
        }
    }
}

/// The JSON types a contract field can have.
public enum FieldType: String, Sendable, Hashable, CaseIterable {
    case string, number, integer, boolean, object, array
}
