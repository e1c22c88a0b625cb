/// The signature base of a response (RFC 9421 §2.5) over `@status` and header fields.
///
/// The gateway signs its service locator document this way, and the client library verifies it:
/// both build the base here, so they cannot disagree. Only what a response signature of that kind
/// needs is supported: `@status` (§2.2.9) and fields given by value, each value already the
/// field's canonical form (one line, trimmed, as sent).
extension SignatureBase {
    /// - Parameters:
    ///   - status: the response's status code.
    ///   - fields: the value of each covered field, by lowercase name.
    /// - Throws: when a covered component is neither `@status` nor among `fields`, has parameters,
    ///   or has a value that is not visible ASCII (and spaces).
    public static func make(forResponseStatus status: Int, fields: [String: String], input: SignatureInput) throws(SigningError) -> String {
        var base = ""
        for component in input.components {
            guard component.parameters.isEmpty else {
                throw .invalidComponent("\(component): parameters are not supported in a response signature")
            }
            let value: String
            if component.name == "@status" {
                value = String(status)
            } else if component.isDerived {
                throw .invalidComponent("\(component): a response signature covers @status and fields only")
            } else if let field = fields[component.name] {
                value = field
            } else {
                throw .componentNotInMessage(component.description)
            }
            guard value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
                throw .nonASCIIValue(component.description)
            }
            base += component.serialized + ": " + value + "\n"
        }
        base += "\"@signature-params\": "
        base += try input.serialized()
        return base
    }
}
