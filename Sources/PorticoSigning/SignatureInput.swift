import RawStructuredFieldValues

/// What one signature covers and under which parameters: one member of `Signature-Input`
/// (RFC 9421 §4.1), e.g. `("@method" "@path");created=1618884473;keyid="app";nonce="…"`.
///
/// The parameters keep the order they were written in, because that order is part of the
/// `@signature-params` line the signature was computed over.
public struct SignatureInput: Sendable, Equatable {
    public var components: [ComponentIdentifier] { didSet { canonicalText = nil } }
    public var parameters: [(key: String, value: RFC9651BareItem)] { didSet { canonicalText = nil } }

    /// The member's text as received, when it is already its canonical serialisation (see
    /// ``StructuredDictionary/members``): ``write(to:)`` copies it instead of serialising.
    /// Any change to the components or parameters drops it.
    private var canonicalText: Substring?

    public init(components: [ComponentIdentifier], parameters: [(key: String, value: RFC9651BareItem)]) {
        self.components = components
        self.parameters = parameters
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

    public var created: Int64? { integer("created") }
    public var expires: Int64? { integer("expires") }
    public var nonce: String? { string("nonce") }
    public var keyID: String? { string("keyid") }
    public var algorithm: String? { string("alg") }
    public var tag: String? { string("tag") }

    private func integer(_ key: String) -> Int64? {
        if case .integer(let value)? = parameters.first(where: { $0.key == key })?.value { return value }
        return nil
    }

    private func string(_ key: String) -> String? {
        if case .string(let value)? = parameters.first(where: { $0.key == key })?.value { return value }
        return nil
    }

    /// Checks the types of the parameters RFC 9421 §2.3 defines; unknown parameters are kept (they
    /// are signed like the rest) but not interpreted.
    func validateParameterTypes() throws(SigningError) {
        for (key, value) in parameters {
            switch (key, value) {
            case ("created", .integer), ("expires", .integer): continue
            case ("nonce", .string), ("keyid", .string), ("alg", .string), ("tag", .string): continue
            case ("created", _), ("expires", _): throw .invalidParameter("\(key) must be an integer (seconds since the epoch)")
            case ("nonce", _), ("keyid", _), ("alg", _), ("tag", _): throw .invalidParameter("\(key) must be a quoted string")
            default: continue
            }
        }
    }

    /// A parsed `Signature-Input` member: its inner list's items and parameters.
    init(
        components items: [StructuredDictionary.Item], parameters: [(key: String, value: RFC9651BareItem)], canonicalText: Substring? = nil
    ) throws(SigningError) {
        var components: [ComponentIdentifier] = []
        components.reserveCapacity(items.count)
        for item in items {
            let component = try ComponentIdentifier(parsed: item)
            if components.contains(component) {
                throw .invalidComponent("\(component) is covered more than once")
            }
            components.append(component)
        }
        self.components = components
        self.parameters = parameters
        self.canonicalText = canonicalText
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
