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
        guard let inputMember = inputs[chosen] else {
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
        return Signature(label: chosen, input: try SignatureInput(components: components, parameters: parameters), value: bytes)
    }

    /// The two field values carrying one signature.
    public static func serialize(
        label: String, input: SignatureInput, signature: [UInt8]
    ) throws(SigningError) -> (
        signatureInput: String, signature: String
    ) {
        var inputMap = OrderedMap<String, ItemOrInnerList>()
        inputMap[label] = .innerList(input.innerList)
        var signatureMap = OrderedMap<String, ItemOrInnerList>()
        signatureMap[label] = .item(
            Item(
                bareItem: RFC9651BareItem.undecodedByteSequence(Data(signature).base64EncodedString()),
                parameters: OrderedMap<String, RFC9651BareItem>()))
        var serializer = StructuredFieldValueSerializer()
        do {
            let inputBytes = try serializer.writeDictionaryFieldValue(inputMap)
            let signatureBytes = try serializer.writeDictionaryFieldValue(signatureMap)
            return (String(decoding: inputBytes, as: UTF8.self), String(decoding: signatureBytes, as: UTF8.self))
        } catch {
            throw .invalidParameter("the label or a parameter cannot be serialised as a structured field (\(error))")
        }
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
