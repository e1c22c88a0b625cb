import Foundation
import RawStructuredFieldValues

/// Reads and writes the `Signature-Input` and `Signature` fields (RFC 9421 §4): dictionaries keyed
/// by label, one holding what each signature covers, the other the signature bytes.
public enum SignatureFields {
    /// One signature picked out of the two fields.
    public struct Signature: Sendable {
        public var label: String
        public var input: SignatureInput
        public var value: [UInt8]
    }

    /// Finds the signature labelled `label`, or the first one in `Signature-Input` when `label` is
    /// nil. Both values are the fields' lines joined with ", " (RFC 9110 §5.3), as received.
    ///
    /// A label repeated within a field is an error rather than "last one wins" (RFC 8941's rule for
    /// dictionaries), so that a client cannot hide a second signature behind the first.
    public static func select(label: String?, signatureInput: String, signature: String) throws(SigningError) -> Signature {
        let inputs = try dictionary(signatureInput, field: "Signature-Input")
        let signatures = try dictionary(signature, field: "Signature")
        guard let chosen = label ?? inputs.members.first?.key else {
            throw .malformedField(field: "Signature-Input", reason: "it is empty")
        }
        guard let (inputMember, canonicalText) = inputs.member(chosen) else {
            if signatures[chosen] != nil { throw .labelMismatch(label: chosen) }
            throw .missingLabel(chosen)
        }
        guard let signatureMember = signatures[chosen] else { throw .labelMismatch(label: chosen) }
        guard case .innerList(let components, let parameters) = inputMember else {
            throw .malformedField(field: "Signature-Input", reason: "the member \"\(chosen)\" must be an inner list of components")
        }
        guard case .item(let item) = signatureMember, case .undecodedByteSequence(let base64) = item.bareItem,
            let bytes = Base64.decode(base64)
        else {
            throw .malformedField(field: "Signature", reason: "the member \"\(chosen)\" must be a byte sequence (:base64:)")
        }
        let input = try SignatureInput(components: components, parameters: parameters, canonicalText: canonicalText)
        return Signature(label: chosen, input: input, value: bytes)
    }

    /// The two field values carrying one signature. `Signature-Input`'s member is the
    /// `@signature-params` value itself, written by the same ``StructuredFieldWriter`` that writes
    /// the signature base, so the two cannot disagree.
    public static func serialize(
        label: String, input: SignatureInput, signature: [UInt8]
    ) throws(SigningError) -> (
        signatureInput: String, signature: String
    ) {
        var key: [UInt8] = []
        do {
            try StructuredFieldWriter.appendKey(label, to: &key)
        } catch {
            throw .invalidParameter("the label \"\(label)\" cannot be a structured-field key")
        }
        var inputBytes = key + [UInt8(ascii: "=")]
        try input.write(to: &inputBytes)
        var signatureBytes = key + [UInt8(ascii: "=")]
        try StructuredFieldWriter.appendBareItem(.undecodedByteSequence(Data(signature).base64EncodedString()), to: &signatureBytes)
        return (String(decoding: inputBytes, as: UTF8.self), String(decoding: signatureBytes, as: UTF8.self))
    }

    /// `value` parsed as a dictionary, in one pass that also refuses a repeated key.
    static func dictionary(_ value: String, field: String) throws(SigningError) -> StructuredDictionary {
        do {
            return try StructuredDictionary.parse(value)
        } catch {
            if let key = error.duplicateKey { throw .duplicateLabel(field: field, label: key) }
            throw .malformedField(field: field, reason: error.description)
        }
    }
}
