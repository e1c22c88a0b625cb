/// Why a source's body could not be reformed into the contract.
///
/// Each one means the source failed for this request: the facade tries its next source, and
/// names the field and the source in the 502 when none is left.
public struct ReformError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The body is larger than the policy allows; it was not parsed.
        case tooLarge(limit: Int)
        /// The body is not well-formed in the source's format.
        case malformed(format: SourceFormat, detail: String)
        /// A required field is absent from the body (or its locator found nothing).
        case missingField(String)
        /// A conversion could not apply to what was found (`"abc"` to number, say).
        case conversionFailed(field: String, conversion: String, found: String)
        /// After its conversions, a field's value is not of the contract's type.
        case wrongType(field: String, expected: FieldType, found: String)
    }

    public var kind: Kind

    public init(_ kind: Kind) {
        self.kind = kind
    }

    /// The contract field concerned, if the error is about one.
    public var field: String? {
        switch kind {
        case .missingField(let name), .conversionFailed(let name, _, _), .wrongType(let name, _, _): name
        case .tooLarge, .malformed: nil
        }
    }

    public var description: String {
        switch kind {
        case .tooLarge(let limit): "the body is larger than \(limit) bytes"
        case .malformed(let format, let detail): "the body is not well-formed \(format.rawValue.uppercased()): \(detail)"
        case .missingField(let name): "the required field \"\(name)\" is missing"
        case .conversionFailed(let field, let conversion, let found):
            "field \"\(field)\": cannot apply \(conversion) to \(found)"
        case .wrongType(let field, let expected, let found):
            "field \"\(field)\" must be \(expected.rawValue == "integer" ? "an" : "a") \(expected.rawValue), found \(found)"
        }
    }
}
