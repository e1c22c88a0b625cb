import RawStructuredFieldValues

/// What one signature covers and under which parameters: one member of `Signature-Input`
/// (RFC 9421 §4.1), e.g. `("@method" "@path");created=1618884473;keyid="app";nonce="…"`.
///
/// The parameters keep the order they were written in, because that order is part of the
/// `@signature-params` line the signature was computed over.
public struct SignatureInput: Sendable, Equatable {
    public var components: [ComponentIdentifier] { didSet { canonicalText = nil } }
    public var parameters: [(key: String, value: RFC9651BareItem)] {
        didSet {
            canonicalText = nil
            known = KnownParameters(parameters)
        }
    }

    /// Where the parameters RFC 9421 §2.3 defines sit in ``parameters``: a verifier reads them
    /// several times per request, and each read was a search comparing keys as strings.
    private var known: KnownParameters

    /// The member's text as received, when it is already its canonical serialisation (see
    /// ``StructuredDictionary/members``): ``write(to:)`` copies it instead of serialising.
    /// Any change to the components or parameters drops it.
    private var canonicalText: Substring?

    public init(components: [ComponentIdentifier], parameters: [(key: String, value: RFC9651BareItem)]) {
        self.components = components
        self.parameters = parameters
        known = KnownParameters(parameters)
    }

    /// The usual parameters in the order RFC 9421's examples use: `created`, `expires`, `nonce`,
    /// `keyid`, `alg`, `tag` (absent ones left out).
    public init(
        components: [ComponentIdentifier], created: Int64? = nil, expires: Int64? = nil, nonce: String? = nil,
        keyID: String? = nil, algorithm: String? = nil, tag: String? = nil
    ) {
        var parameters: [(key: String, value: RFC9651BareItem)] = []
        if let created { parameters.append(("created", .integer(created))) }
        if let expires { parameters.append(("expires", .integer(expires))) }
        if let nonce { parameters.append(("nonce", .string(nonce))) }
        if let keyID { parameters.append(("keyid", .string(keyID))) }
        if let algorithm { parameters.append(("alg", .string(algorithm))) }
        if let tag { parameters.append(("tag", .string(tag))) }
        self.init(components: components, parameters: parameters)
    }

    public var created: Int64? { integer(at: known.created) }
    public var expires: Int64? { integer(at: known.expires) }
    public var nonce: String? { string(at: known.nonce) }
    public var keyID: String? { string(at: known.keyID) }
    public var algorithm: String? { string(at: known.algorithm) }
    public var tag: String? { string(at: known.tag) }

    private func integer(at index: Int16) -> Int64? {
        guard index >= 0, case .integer(let value) = parameters[Int(index)].value else { return nil }
        return value
    }

    private func string(at index: Int16) -> String? {
        guard index >= 0, case .string(let value) = parameters[Int(index)].value else { return nil }
        return value
    }

    /// The first position of each defined parameter in a list (-1: absent), and the first one of
    /// them with a value of the wrong type, found in one pass.
    private struct KnownParameters: Sendable {
        var created: Int16 = -1
        var expires: Int16 = -1
        var nonce: Int16 = -1
        var keyID: Int16 = -1
        var algorithm: Int16 = -1
        var tag: Int16 = -1
        var mistyped: Int16 = -1

        init(_ parameters: [(key: String, value: RFC9651BareItem)]) {
            // Positions past Int16's range are left unread (a list that long is refused anyway by
            // the head's size limit long before).
            for (offset, parameter) in parameters.prefix(Int(Int16.max)).enumerated() {
                let index = Int16(offset)
                var isInteger = false
                var isString = false
                switch parameter.value {
                case .integer: isInteger = true
                case .string: isString = true
                default: break
                }
                // Told apart by length first, so that each key is compared with at most two names.
                let key = parameter.key
                switch key.utf8.count {
                case 3 where key == "alg": Self.record(index, in: &algorithm, mistyped: &mistyped, valid: isString)
                case 3 where key == "tag": Self.record(index, in: &tag, mistyped: &mistyped, valid: isString)
                case 5 where key == "nonce": Self.record(index, in: &nonce, mistyped: &mistyped, valid: isString)
                case 5 where key == "keyid": Self.record(index, in: &keyID, mistyped: &mistyped, valid: isString)
                case 7 where key == "created": Self.record(index, in: &created, mistyped: &mistyped, valid: isInteger)
                case 7 where key == "expires": Self.record(index, in: &expires, mistyped: &mistyped, valid: isInteger)
                default: continue
                }
            }
        }

        private static func record(_ index: Int16, in position: inout Int16, mistyped: inout Int16, valid: Bool) {
            if position < 0 { position = index }
            if !valid, mistyped < 0 { mistyped = index }
        }
    }

    /// Checks the types of the parameters RFC 9421 §2.3 defines; unknown parameters are kept (they
    /// are signed like the rest) but not interpreted.
    func validateParameterTypes() throws(SigningError) {
        guard known.mistyped >= 0 else { return }
        let key = parameters[Int(known.mistyped)].key
        if key == "created" || key == "expires" {
            throw .invalidParameter("\(key) must be an integer (seconds since the epoch)")
        }
        throw .invalidParameter("\(key) must be a quoted string")
    }

    /// A parsed `Signature-Input` member: its components (already checked: lowercase, none twice)
    /// and its parameters, whose types are checked here.
    init(
        checkedComponents components: [ComponentIdentifier], parameters: [(key: String, value: RFC9651BareItem)],
        canonicalText: Substring?
    ) throws(SigningError) {
        self.components = components
        self.parameters = parameters
        self.canonicalText = canonicalText
        known = KnownParameters(parameters)
        try validateParameterTypes()
    }

    /// The value of the `@signature-params` line, which is also this member's value in
    /// `Signature-Input`: the canonical serialisation of the inner list and its parameters.
    public func serialized() throws(SigningError) -> String {
        var bytes: [UInt8] = []
        try write(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``serialized()``'s bytes.
    func write(to bytes: inout [UInt8]) throws(SigningError) {
        if let canonicalText {
            bytes.appendUTF8(canonicalText)
            return
        }
        bytes.append(UInt8(ascii: "("))
        for (offset, component) in components.enumerated() {
            if offset > 0 { bytes.append(UInt8(ascii: " ")) }
            try component.write(to: &bytes)
        }
        bytes.append(UInt8(ascii: ")"))
        try StructuredFieldWriter.appendParameters(parameters, to: &bytes)
    }

    public static func == (lhs: SignatureInput, rhs: SignatureInput) -> Bool {
        lhs.components == rhs.components && lhs.parameters.elementsEqual(rhs.parameters) { $0.key == $1.key && $0.value == $1.value }
    }
}
