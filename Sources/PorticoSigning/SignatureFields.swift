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
        guard let chosen = label ?? inputs.first?.0 else { throw .malformedField(field: "Signature-Input", reason: "it is empty") }
        guard let inputMember = inputs[chosen] else {
            if signatures[chosen] != nil { throw .labelMismatch(label: chosen) }
            throw .missingLabel(chosen)
        }
        guard let signatureMember = signatures[chosen] else { throw .labelMismatch(label: chosen) }
        guard case .innerList(let list) = inputMember else {
            throw .malformedField(field: "Signature-Input", reason: "the member \"\(chosen)\" must be an inner list of components")
        }
        guard case .item(let item) = signatureMember, case .undecodedByteSequence(let base64) = item.rfc9651BareItem,
            let bytes = Data(base64Encoded: base64)
        else {
            throw .malformedField(field: "Signature", reason: "the member \"\(chosen)\" must be a byte sequence (:base64:)")
        }
        return Signature(label: chosen, input: try SignatureInput(innerList: list), value: Array(bytes))
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

    static func dictionary(_ value: String, field: String) throws(SigningError) -> OrderedMap<String, ItemOrInnerList> {
        let bytes = Array(value.utf8)
        var parser = StructuredFieldValueParser(bytes)
        let map: OrderedMap<String, ItemOrInnerList>
        do {
            map = try parser.parseDictionaryFieldValue()
        } catch {
            throw .malformedField(field: field, reason: "\(error)")
        }
        let keys = topLevelKeys(bytes)
        if keys.count != map.count {
            var seen = Set<Substring>()
            let repeated = keys.first { !seen.insert($0).inserted } ?? ""
            throw .duplicateLabel(field: field, label: String(repeated))
        }
        return map
    }

    /// The member keys of a dictionary field value that has already parsed, in order and with
    /// repeats (which the parser folds away). Only quoted strings, display strings and parentheses
    /// can hide a comma, so those are skipped.
    static func topLevelKeys(_ bytes: [UInt8]) -> [Substring] {
        var keys: [Substring] = []
        var index = 0
        while index < bytes.count {
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") { index += 1 }
            let start = index
            while index < bytes.count, isKeyByte(bytes[index]) { index += 1 }
            keys.append(Substring(decoding: bytes[start..<index], as: UTF8.self))
            var depth = 0
            var inString = false
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                if inString {
                    if byte == UInt8(ascii: "\\") {
                        index += 1
                    } else if byte == UInt8(ascii: "\"") {
                        inString = false
                    }
                } else if byte == UInt8(ascii: "\"") {
                    inString = true
                } else if byte == UInt8(ascii: "(") {
                    depth += 1
                } else if byte == UInt8(ascii: ")") {
                    depth -= 1
                } else if byte == UInt8(ascii: ","), depth == 0 {
                    break
                }
            }
        }
        return keys
    }

    private static func isKeyByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "*"):
            true
        default: false
        }
    }
}
