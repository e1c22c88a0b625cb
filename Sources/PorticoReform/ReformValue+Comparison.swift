extension ReformValue {
    /// The first contract field, in order, whose value differs between two reformed results (one
    /// present and the other absent counts); `nil` when they agree. What a shadow comparison logs.
    public static func firstDifference(_ active: ReformValue, _ shadow: ReformValue, contract: Contract) -> String? {
        for field in contract.fields where active[field.name] != shadow[field.name] {
            return field.name
        }
        return nil
    }

    /// Several sources' partial results merged into one object in `contract`'s order; for a field
    /// more than one part holds, the first part's value wins (parts come in the policy's order).
    public static func merge(_ parts: [ReformValue], contract: Contract) -> ReformValue {
        var fields: [(key: String, value: ReformValue)] = []
        for field in contract.fields {
            if let value = parts.lazy.compactMap({ $0[field.name] }).first { fields.append((field.name, value)) }
        }
        return .object(fields)
    }

    /// The first required field of `contract` this object lacks, if any.
    public static func missingRequired(in object: ReformValue, contract: Contract) -> String? {
        contract.fields.first { $0.required && object[$0.name] == nil }?.name
    }
}
