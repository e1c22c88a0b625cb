import Foundation
import RawStructuredFieldValues

/// One signature read in place: what the verifier needs from `Signature-Input` and `Signature`
/// kept as positions in the received field and a handful of values, with no component
/// identifiers, parameter lists or strings built, and its signature base written into a buffer on
/// the stack.
///
/// **Why a second reading.** Nearly every signed request is the same shape: a canonically written
/// member (as signers write it), covering request components that take no parameters. Building
/// the general types for it (``SignatureInput``, ``ComponentIdentifier``s, a growable base) cost
/// about twice the two MACs. This reading covers that shape only, over the same grammar
/// (``StructuredFieldParser``): every member of both fields is still parsed and checked. Whatever
/// it does not cover (a non-canonical member, a component with parameters or an escaped name, a
/// repeated or absent field, a non-ASCII value, a base over ``baseCapacity``, any error at all)
/// makes ``read(label:signature:)`` return false or ``verify(request:candidates:_:)`` return
/// nil, and the caller takes the general path (``SignatureFields/select(label:signatureInput:signature:)``
/// and ``MessageSignature/verify(_:request:candidates:_:)``), which gives the exact answer or error.
/// So the view never decides a case differently: where it answers, the tests and the fuzzer hold
/// it to the general path's answer.
package struct SignatureView: ~Copyable {
    /// One covered component: where its item (`"@method"`, `"date"`) is in `Signature-Input`, and
    /// which derived component it is (``field``: a header field).
    struct Component {
        var start: UInt16
        var end: UInt16
        var kind: UInt8

        static let field = UInt8.max

        var item: Range<Int> { Int(start)..<Int(end) }
        /// The name: the item without its quotes.
        var name: Range<Int> { (Int(start) + 1)..<(Int(end) - 1) }
        var derived: SignatureBase.DerivedComponent? { SignatureBase.DerivedComponent(rawValue: kind) }
    }

    /// The components, in a fixed block inside the view (no array to allocate), one word each.
    /// (`InlineArray` would say it plainly, but needs a runtime newer than the apps the client
    /// library, which this module is part of, still supports.)
    struct Components {
        private var words:
            (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        private(set) var count = 0
        static let capacity = 16

        subscript(index: Int) -> Component {
            precondition(index >= 0 && index < count)
            let word = withUnsafeBytes(of: words) { $0.load(fromByteOffset: index * 8, as: UInt64.self) }
            return Component(
                start: UInt16(truncatingIfNeeded: word), end: UInt16(truncatingIfNeeded: word >> 16),
                kind: UInt8(truncatingIfNeeded: word >> 32))
        }

        /// False, adding nothing, when the block is full.
        mutating func append(_ component: Component) -> Bool {
            guard count < Self.capacity else { return false }
            let word = UInt64(component.start) | UInt64(component.end) << 16 | UInt64(component.kind) << 32
            withUnsafeMutableBytes(of: &words) { $0.storeBytes(of: word, toByteOffset: count * 8, as: UInt64.self) }
            count += 1
            return true
        }
    }

    /// The longest signature base built in place (on the stack); a longer one takes the general path.
    static let baseCapacity = 1024

    /// The `Signature-Input` field value: the components and the canonical text are ranges of it.
    let signatureInput: String
    /// A signature covering more than ``Components/capacity`` takes the general path.
    private var components = Components()
    /// How many components the signature covers (at most ``Components/capacity``).
    package var componentCount: Int { components.count }
    /// The derived components covered, one bit each (``SignatureBase/DerivedComponent``'s raw value).
    package private(set) var derivedComponents: UInt16 = 0
    /// The member's inner list and parameters: the `@signature-params` value, as received.
    private var canonicalRange = 0..<0
    /// The signature's 32 bytes.
    private var mac: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    package private(set) var keyID: String?
    package private(set) var created: Int64?
    package private(set) var expires: Int64?
    package private(set) var nonce: String?
    private var wasRead = false
    /// The parameters read so far, one bit each.
    private var parametersSeen: UInt8 = 0

    /// A view of `signatureInput`, not read yet (``read(label:signature:)``).
    package init(signatureInput: String) {
        self.signatureInput = signatureInput
    }

    /// Reads the signature labelled `label` (or the first one when `label` is nil); false when the
    /// general path must read it (see the type's notes). Read into a view the caller holds: a view
    /// returned as an optional was copied whole twice on its way out.
    ///
    /// A view reads once: a second call would read on top of the first one's components.
    package mutating func read(label: String?, signature: String) -> Bool {
        precondition(!wasRead, "a SignatureView reads one signature")
        wasRead = true
        // Positions are kept in 16 bits; a longer field (far past any real one) takes the general path.
        guard signatureInput.utf8.count <= Int(UInt16.max), let chosen = readInput(label: label) else { return false }
        return readSignature(signature, label: chosen)
    }

    /// ``read(label:signature:)`` into a new view; nil for the general path.
    static func read(label: String?, signatureInput: String, signature: String) -> SignatureView? {
        var view = SignatureView(signatureInput: signatureInput)
        guard view.read(label: label, signature: signature) else { return nil }
        return view
    }

    /// The bit of `derived` in ``derivedComponents``.
    static func bit(_ derived: SignatureBase.DerivedComponent) -> UInt16 { 1 << UInt16(derived.rawValue) }

    /// The bit of the derived component `name` (`@method`) in ``derivedComponents``; nil for a
    /// name a view never holds (a field, `@query-param`, an unknown name).
    package static func bit(ofDerived name: String) -> UInt16? {
        guard let derived = SignatureBase.DerivedComponent(name), derived.isPlainRequestComponent else { return nil }
        return bit(derived)
    }

    /// Whether the header field `lowercaseName` is covered.
    package func coversField(_ lowercaseName: String) -> Bool {
        var input = signatureInput
        var name = lowercaseName
        return input.withUTF8 { field in
            name.withUTF8 { name in
                for index in 0..<components.count where components[index].kind == Component.field {
                    if UnsafeBufferPointer(rebasing: field[components[index].name]).elementsEqual(name) { return true }
                }
                return false
            }
        }
    }

    // MARK: Reading

    /// Gives up reading as soon as the chosen member turns out to be a shape the view does not
    /// read: the general path parses the whole field anyway, so reading on would only double the
    /// work (a field of hundreds of components costs twice as much otherwise).
    private static let abandoned = StructuredFieldParser.ParseError(reason: "left to the general reading", offset: 0)

    /// Reads the chosen `Signature-Input` member; returns its label, or nil for the general path.
    private mutating func readInput(label: String?) -> String? {
        var chosen: String?
        var usable = false
        do throws(StructuredFieldParser.ParseError) {
            try StructuredFieldParser.read(signatureInput, limits: .signatureFields) {
                (parser: inout StructuredFieldParser) throws(StructuredFieldParser.ParseError) in
                try parser.dictionaryField {
                    (parser: inout StructuredFieldParser, key: Range<Int>) throws(StructuredFieldParser.ParseError) in
                    let isChosen = label.map { parser.bytes(key, equal: $0) } ?? (chosen == nil)
                    guard isChosen else {
                        _ = try parser.memberValue()
                        return
                    }
                    guard parser.skipEquals(before: UInt8(ascii: "(")) else { throw Self.abandoned }  // not an inner list
                    chosen = parser.string(key)
                    let start = parser.index
                    parser.canonical = true
                    usable = true
                    try parser.innerList(
                        { (parser: inout StructuredFieldParser) throws(StructuredFieldParser.ParseError) in
                            if !(try readComponent(&parser)) { throw Self.abandoned }
                        },
                        parameters: { (parser: inout StructuredFieldParser) throws(StructuredFieldParser.ParseError) in
                            try parser.parameters { parser, key, value in
                                if !readParameter(key: UnsafeBufferPointer(rebasing: parser.bytes[key]), value: value) { usable = false }
                            }
                        })
                    if !parser.canonical || !usable { throw Self.abandoned }
                    canonicalRange = start..<parser.index
                }
            }
        } catch {
            return nil
        }
        guard usable else { return nil }
        return chosen
    }

    /// Reads one inner-list item as a component; false when the general path must read it (the
    /// caller then stops reading).
    private mutating func readComponent(_ parser: inout StructuredFieldParser) throws(StructuredFieldParser.ParseError) -> Bool {
        let start = parser.index
        guard parser.current == UInt8(ascii: "\"") else { return false }
        let (name, escaped) = try parser.quotedStringRange()
        guard parser.current != UInt8(ascii: ";") else { return false }
        guard !escaped, !name.isEmpty, components.count < Components.capacity else { return false }
        let nameBytes = UnsafeBufferPointer(rebasing: parser.bytes[name])
        var kind = Component.field
        if nameBytes[0] == UInt8(ascii: "@") {
            // Every derived name is a known one (a literal, not a string built from the bytes).
            guard let derived = StructuredFieldParser.known(nameBytes).flatMap(SignatureBase.DerivedComponent.init),
                derived.isPlainRequestComponent,
                derivedComponents & Self.bit(derived) == 0  // not covered twice
            else { return false }
            derivedComponents |= Self.bit(derived)
            kind = derived.rawValue
        } else {
            guard !nameBytes.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else { return false }
            for index in 0..<components.count where components[index].kind == Component.field {
                if parser.sameBytes(components[index].name, name) { return false }  // covered twice
            }
        }
        return components.append(Component(start: UInt16(start), end: UInt16(parser.index), kind: kind))
    }

    /// One of the member's parameters: those RFC 9421 §2.3 defines, each of its type. False for
    /// the general path: a mistyped one, one given twice, an `alg` other than `hmac-sha256`, or one
    /// the RFC does not define (the general path keeps those).
    private mutating func readParameter(key: UnsafeBufferPointer<UInt8>, value: RFC9651BareItem) -> Bool {
        let bit: UInt8
        switch value {
        case .integer(let seconds) where key.holds("created"):
            bit = 1
            created = seconds
        case .integer(let seconds) where key.holds("expires"):
            bit = 2
            expires = seconds
        case .string(let id) where key.holds("keyid"):
            bit = 4
            keyID = id
        case .string(let value) where key.holds("nonce"):
            bit = 8
            nonce = value
        case .string(let algorithm) where key.holds("alg"):
            guard algorithm == MessageSignature.algorithm else { return false }
            bit = 16
        case .string where key.holds("tag"):
            bit = 32
        default:
            return false
        }
        guard parametersSeen & bit == 0 else { return false }
        parametersSeen |= bit
        return true
    }

    /// Reads the `Signature` member labelled `label` (every other member is checked); false for
    /// the general path.
    private mutating func readSignature(_ signature: String, label: String) -> Bool {
        var read = false
        do throws(StructuredFieldParser.ParseError) {
            try StructuredFieldParser.read(signature, limits: .signatureFields) {
                (parser: inout StructuredFieldParser) throws(StructuredFieldParser.ParseError) in
                try parser.dictionaryField {
                    (parser: inout StructuredFieldParser, key: Range<Int>) throws(StructuredFieldParser.ParseError) in
                    guard parser.bytes(key, equal: label), parser.skipEquals(before: UInt8(ascii: ":")) else {
                        _ = try parser.memberValue()
                        return
                    }
                    let encoded = UnsafeBufferPointer(rebasing: parser.bytes[try parser.byteSequenceRange()])
                    _ = try parser.parameters()
                    guard Base64.decodedCount(encoded) == MessageSignature.macLength else { return }
                    read = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: MessageSignature.macLength) { bytes in
                        guard Base64.decode(encoded, into: bytes) else { return false }
                        withUnsafeMutableBytes(of: &mac) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
                        return true
                    }
                }
            }
        } catch {
            return false
        }
        return read
    }

    // MARK: Verifying

    /// Builds the signature base over `request` and checks the signature under each key, as
    /// ``MessageSignature/verify(_:request:candidates:_:)`` does: both MACs always computed and
    /// compared in full. Nil, before any MAC, when the base cannot be built here (a covered field
    /// absent or repeated, a value that is not ASCII, a base over ``baseCapacity``).
    package func verify(
        request: some SignableRequest, candidates first: any MessageAuthenticator, _ second: any MessageAuthenticator
    ) -> (first: Bool, second: Bool)? {
        var input = signatureInput
        return input.withUTF8 { field in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.baseCapacity) { buffer in
                var base = FixedByteWriter(buffer)
                guard writeBase(field: field, request: request, to: &base) else { return nil }
                let message = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[0..<base.count]))
                return withUnsafeBytes(of: mac) { MessageSignature.matches($0, message: message, first, second) }
            }
        }
    }

    /// The signature base ``verify(request:candidates:_:)`` computes its MACs over; for the tests
    /// and the fuzzer, which hold it to ``SignatureBase/make(for:request:)``'s. (It repeats
    /// `verify`'s frame rather than sharing it through a closure: measured, the closure cost the
    /// hot path 25–60 ns.)
    func base(request: some SignableRequest) -> [UInt8]? {
        var input = signatureInput
        return input.withUTF8 { field in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.baseCapacity) { buffer in
                var base = FixedByteWriter(buffer)
                guard writeBase(field: field, request: request, to: &base) else { return nil }
                return Array(buffer[0..<base.count])
            }
        }
    }

    private func writeBase(field: UnsafeBufferPointer<UInt8>, request: some SignableRequest, to base: inout FixedByteWriter) -> Bool {
        for index in 0..<components.count {
            let component = components[index]
            base.appendBytes(UnsafeBufferPointer(rebasing: field[component.item]))
            base.appendByte(UInt8(ascii: ":"))
            base.appendByte(UInt8(ascii: " "))
            let valueStart = base.count
            if let derived = component.derived {
                SignatureBase.appendValue(of: derived, request: request, to: &base)
            } else {
                let nameBytes = UnsafeBufferPointer(rebasing: field[component.name])
                let name = StructuredFieldParser.known(nameBytes) ?? String(decoding: nameBytes, as: UTF8.self)
                guard let value = request.onlyFieldValue(name) else { return false }
                base.appendUTF8(SignatureBase.trimmingWhitespace(value))
            }
            guard !base.overflowed, SignatureBase.isVisibleASCII(base.written(from: valueStart)) else { return false }
            base.appendByte(UInt8(ascii: "\n"))
        }
        base.appendLiteral(SignatureBase.signatureParametersLine)
        base.appendBytes(UnsafeBufferPointer(rebasing: field[canonicalRange]))
        return !base.overflowed
    }
}

/// Bytes written into a fixed buffer; what does not fit is dropped and marks the writer
/// overflowed.
struct FixedByteWriter: ByteSink {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private(set) var count = 0
    private(set) var overflowed = false

    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    mutating func appendByte(_ byte: UInt8) {
        guard count < buffer.count else { return overflowed = true }
        buffer[count] = byte
        count += 1
    }

    mutating func appendBytes(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count <= buffer.count - count else { return overflowed = true }
        if let source = bytes.baseAddress { (buffer.baseAddress! + count).initialize(from: source, count: bytes.count) }
        count += bytes.count
    }

    /// What was written from `start` on.
    func written(from start: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: buffer[start..<count])
    }
}
