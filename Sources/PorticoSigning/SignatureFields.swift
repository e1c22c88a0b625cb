import Foundation
import PorticoHTTP
import RawStructuredFieldValues

/// Reads and writes the `Signature-Input` and `Signature` fields (RFC 9421 §4): dictionaries keyed
/// by label, one holding what each signature covers, the other the signature bytes.
public enum SignatureFields {
    private typealias Parser = StructuredFieldParser

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
    ///
    /// Both fields are parsed whole (every member is checked), but the chosen members are read
    /// straight into ``SignatureInput`` and the signature's bytes, with no dictionary of items in
    /// between: building and then converting one cost about half of a verification. The errors
    /// come in the order reading the dictionaries first would give them; the tests and the fuzzer
    /// check the result against that reading (``dictionaryReading(label:signatureInput:signature:maxComponents:)``).
    ///
    /// - Parameter maxComponents: the most components the chosen signature may cover; more is
    ///   ``SigningError/tooManyComponents(limit:)``. The items past it are still parsed, but not
    ///   made into components or compared with the others, so a long list costs a verifier no
    ///   more than reading its bytes.
    public static func select(
        label: String?, signatureInput: String, signature: String, maxComponents: Int = .max
    ) throws(SigningError) -> Signature {
        let input = try InputMember.read(signatureInput, label: label, maxComponents: maxComponents)
        let chosen = label ?? input.firstLabel
        let value = try SignatureMember.read(signature, label: chosen)
        guard let chosen else { throw .malformedField(field: "Signature-Input", reason: "it is empty") }
        guard input.found else {
            if value.found { throw .labelMismatch(label: chosen) }
            throw .missingLabel(chosen)
        }
        guard value.found else { throw .labelMismatch(label: chosen) }
        guard input.isInnerList else {
            throw .malformedField(field: "Signature-Input", reason: "the member \"\(chosen)\" must be an inner list of components")
        }
        guard let bytes = value.bytes else {
            throw .malformedField(field: "Signature", reason: "the member \"\(chosen)\" must be a byte sequence (:base64:)")
        }
        if let componentError = input.componentError { throw componentError }
        let canonicalText = input.canonicalRange.map { signatureInput.utf8Slice($0) }
        let signatureInput = try SignatureInput(
            checkedComponents: input.components, parameters: input.parameters, canonicalText: canonicalText)
        return Signature(label: chosen, input: signatureInput, value: bytes)
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
    static func dictionary(
        _ value: String, field: String, limits: StructuredFieldParser.Limits = .unbounded
    ) throws(SigningError) -> StructuredDictionary {
        do {
            return try StructuredDictionary.parse(value, limits: limits)
        } catch {
            throw fieldError(error, field: field)
        }
    }

    /// Parses `value` as a dictionary, handing each member to `member` (see
    /// ``StructuredFieldParser/dictionaryField(_:)``); a parse error becomes the signing error
    /// naming `field`.
    private static func readMembers(
        of value: String, field: String, _ member: (inout Parser, Range<Int>) throws(Parser.ParseError) -> Void
    ) throws(SigningError) {
        do {
            try Parser.read(value, limits: .signatureFields) { (parser: inout Parser) throws(Parser.ParseError) in
                try parser.dictionaryField(member)
            }
        } catch {
            throw fieldError(error, field: field)
        }
    }

    /// A parse error as the signing error naming `field`: a repeated key is a repeated label.
    static func fieldError(_ error: StructuredDictionary.ParseError, field: String) -> SigningError {
        if let key = error.duplicateKey { return .duplicateLabel(field: field, label: key) }
        return .malformedField(field: field, reason: error.description)
    }

    /// What ``select(label:signatureInput:signature:)`` must return, read the plain way: both fields
    /// parsed into dictionaries, the chosen members picked and converted. The verifier does not use
    /// it (it costs twice the time); it is the reference the tests and the fuzzer hold `select` to,
    /// result for result and error for error.
    static func dictionaryReading(
        label: String?, signatureInput: String, signature: String, maxComponents: Int = .max
    ) throws(SigningError) -> SignatureFields.Signature {
        let inputs = try SignatureFields.dictionary(signatureInput, field: "Signature-Input", limits: .signatureFields)
        let signatures = try SignatureFields.dictionary(signature, field: "Signature", limits: .signatureFields)
        guard let chosen = label ?? inputs.members.first?.key else {
            throw .malformedField(field: "Signature-Input", reason: "it is empty")
        }
        guard let inputMember = inputs[chosen] else {
            if signatures[chosen] != nil { throw .labelMismatch(label: chosen) }
            throw .missingLabel(chosen)
        }
        guard let signatureMember = signatures[chosen] else { throw .labelMismatch(label: chosen) }
        guard case .innerList(let items, let parameters) = inputMember else {
            throw .malformedField(field: "Signature-Input", reason: "the member \"\(chosen)\" must be an inner list of components")
        }
        guard case .item(let item) = signatureMember, case .undecodedByteSequence(let base64) = item.bareItem,
            let bytes = Base64.decode(base64)
        else {
            throw .malformedField(field: "Signature", reason: "the member \"\(chosen)\" must be a byte sequence (:base64:)")
        }
        var components: [ComponentIdentifier] = []
        for item in items {
            if components.count == maxComponents { throw .tooManyComponents(limit: maxComponents) }
            let component = try ComponentIdentifier(parsed: item)
            if components.contains(component) { throw .invalidComponent("\(component) is covered more than once") }
            components.append(component)
        }
        let input = SignatureInput(components: components, parameters: parameters)
        try input.validateParameterTypes()
        return SignatureFields.Signature(label: chosen, input: input, value: bytes)
    }

    /// The chosen member of `Signature-Input`, read while the whole field is parsed.
    private struct InputMember {
        /// The first member's label, read only when no label was asked for.
        var firstLabel: String?
        var found = false
        var isInnerList = false
        /// The inner list's items as components, each checked; reading stops adding at the first
        /// that fails, which is kept to be thrown once both fields have parsed.
        var components: [ComponentIdentifier] = []
        var componentError: SigningError?
        var parameters: StructuredFieldParser.Parameters = []
        /// The member's text when it is written canonically (see ``StructuredDictionary/members``).
        var canonicalRange: Range<Int>?

        /// Read into a local, not into `self` from an initialiser: the closures then borrow it in
        /// place (a profile showed the initialiser's `self` copied in and out of them).
        static func read(_ value: String, label: String?, maxComponents: Int) throws(SigningError) -> InputMember {
            var reading = InputMember()
            try SignatureFields.readMembers(of: value, field: "Signature-Input") {
                (parser: inout Parser, key: Range<Int>) throws(Parser.ParseError) in
                let isChosen: Bool
                if let label {
                    isChosen = parser.bytes(key, equal: label)  // a repeated key never gets here
                } else {
                    isChosen = reading.firstLabel == nil
                    if isChosen { reading.firstLabel = parser.string(key) }
                }
                guard isChosen else {
                    _ = try parser.memberValue()
                    return
                }
                reading.found = true
                guard parser.skipEquals(before: UInt8(ascii: "(")) else {
                    _ = try parser.memberValue()
                    return
                }
                reading.isInnerList = true
                let start = parser.index
                parser.canonical = true
                reading.parameters = try parser.innerList { (parser: inout Parser) throws(Parser.ParseError) in
                    // Once a component is refused (past the limit, say), the rest are only checked.
                    guard reading.componentError == nil else { return try parser.skipItem() }
                    let item = try parser.item()
                    do throws(SigningError) {
                        if reading.components.count == maxComponents { throw .tooManyComponents(limit: maxComponents) }
                        let component = try ComponentIdentifier(parsed: item)
                        if reading.components.contains(component) {
                            throw .invalidComponent("\(component) is covered more than once")
                        }
                        if reading.components.isEmpty { reading.components.reserveCapacity(8) }
                        reading.components.append(component)
                    } catch {
                        reading.componentError = error
                    }
                }
                if parser.canonical { reading.canonicalRange = start..<parser.index }
            }
            return reading
        }
    }

    /// The chosen member of `Signature`, read while the whole field is parsed: its bytes, decoded
    /// from the field's own (no base64 string in between).
    private struct SignatureMember {
        var found = false
        /// Nil when the member is not a byte sequence of valid base64.
        var bytes: [UInt8]?

        /// `label` nil (`Signature-Input` had no member): the field is only checked.
        static func read(_ value: String, label: String?) throws(SigningError) -> SignatureMember {
            var reading = SignatureMember()
            try SignatureFields.readMembers(of: value, field: "Signature") {
                (parser: inout Parser, key: Range<Int>) throws(Parser.ParseError) in
                guard let label, parser.bytes(key, equal: label) else {
                    _ = try parser.memberValue()
                    return
                }
                reading.found = true
                guard parser.skipEquals(before: UInt8(ascii: ":")) else {
                    _ = try parser.memberValue()
                    return
                }
                let encoded = try parser.byteSequenceRange()
                _ = try parser.parameters()
                reading.bytes = Base64.decode(UnsafeBufferPointer(rebasing: parser.bytes[encoded]))
            }
            return reading
        }
    }
}
