import Foundation
import RawStructuredFieldValues

/// The signature base (RFC 9421 §2.5): one line per covered component, `"name";params: value`,
/// then the `@signature-params` line. This is the exact text the HMAC is computed over.
///
/// It is written as bytes into one array that goes straight to the MAC: no `String` per line, no
/// re-serialising through the structured-headers library (the verifier's base cost 4.5 µs that
/// way, most of a verification).
public enum SignatureBase {
    /// Builds the signature base of `input` over `request`.
    ///
    /// Throws when a covered component is absent from the request, not supported, or has a value
    /// that is not ASCII (a signer must refuse such a request rather than sign something the
    /// verifier cannot rebuild).
    public static func make(for input: SignatureInput, request: some SignableRequest) throws(SigningError) -> String {
        var base: [UInt8] = []
        try write(for: input, request: request, to: &base)
        return String(decoding: base, as: UTF8.self)
    }

    /// Appends the signature base of `input` over `request` to `base`.
    ///
    /// Its cost is linear in the size of the request: what several components read (the query for
    /// `@query-param`, a dictionary field for `;key=`) is parsed once per base and looked up after
    /// that (``RequestReadings``), so a signature covering hundreds of query parameters costs one
    /// pass over the query, not one per parameter.
    ///
    /// - Parameter maxBytes: the longest base built; one that would be longer throws
    ///   ``SigningError/baseTooLarge(limit:)`` as soon as it is, so a verifier never computes a MAC
    ///   over more than this (the components' values can otherwise repeat the whole head dozens of
    ///   times).
    public static func write(
        for input: SignatureInput, request: some SignableRequest, to base: inout [UInt8], maxBytes: Int = .max
    ) throws(SigningError) {
        let start = base.count
        base.reserveCapacity(base.count + min(64 * (input.components.count + 2), maxBytes))
        var readings = RequestReadings(covered: input.components)
        for component in input.components {
            try component.write(to: &base)
            base.append(UInt8(ascii: ":"))
            base.append(UInt8(ascii: " "))
            let valueStart = base.count
            try appendValue(component, request: request, readings: &readings, to: &base)
            try requireASCII(base[valueStart...], component: component)
            base.append(UInt8(ascii: "\n"))
            if base.count - start > maxBytes { throw .baseTooLarge(limit: maxBytes) }
        }
        base.appendLiteral(signatureParametersLine)
        try input.write(to: &base)
        if base.count - start > maxBytes { throw .baseTooLarge(limit: maxBytes) }
    }

    /// What the components of one base read from the request more than once, read once: the
    /// query's parameters (`@query-param`) and each dictionary field (`;key=`), parsed when the
    /// first component needs them.
    struct RequestReadings {
        /// The components of the base: which query parameters and dictionary members it reads.
        let covered: [ComponentIdentifier]
        /// Each covered query parameter's first value, re-encoded, and how often its name occurs.
        private var queryParameters: [String: (value: String, count: Int)]?
        /// Each dictionary field read so far, by field name (lowercase): its covered members, or
        /// why it has none.
        private var dictionaries: [String: Result<[String: StructuredDictionary.Value], Unreadable>] = [:]

        /// Why a field gives no dictionary.
        enum Unreadable: Error {
            case absent, notADictionary
        }

        init(covered: [ComponentIdentifier]) {
            self.covered = covered
        }

        /// The value of the query parameter `name` (re-encoded, as `@query-param` signs it), with
        /// the number of times the name occurs. The first call reads the query once for every
        /// parameter the signature covers (`covered`); the others only look up.
        mutating func queryParameter(_ name: String, request: some SignableRequest) -> (value: String, count: Int)? {
            if queryParameters == nil {
                var names = Set<String>()
                for component in covered where component.name == "@query-param" {
                    if case .string(let covered)? = component.parameter("name") { names.insert(covered) }
                }
                var target = request.requestTarget
                let offset = request.queryOffset
                queryParameters = target.withUTF8 { bytes in
                    guard let offset else { return [:] }
                    return QueryParameters.find(names, in: UnsafeBufferPointer(rebasing: bytes[(offset + 1)...]))
                }
            }
            return queryParameters![name]
        }

        enum DictionaryMember {
            case member(StructuredDictionary.Value)
            /// The field has no such member, or there is no such field.
            case absent
            /// The field is not a structured dictionary.
            case notADictionary
        }

        /// The member `key` of the field `name` read as a dictionary; `combined` gives the field's
        /// lines joined (nil when it has none), asked for the first time the field is read only.
        ///
        /// The field is read once for all of its members the signature covers: each member is
        /// parsed (the whole field must be a dictionary), and only the covered ones are kept. A
        /// repeated key keeps its last value, as RFC 9651 reads dictionaries.
        mutating func dictionaryMember(_ key: String, field name: String, combined: () -> String?) -> DictionaryMember {
            if dictionaries[name] == nil {
                var keys = Set<String>()
                for component in covered where component.name == name {
                    if case .string(let member)? = component.parameter("key") { keys.insert(member) }
                }
                // For a binary search by bytes per member: no string made, nothing hashed.
                let wanted = SortedByteStrings(keys)
                if let text = combined() {
                    var members: [String: StructuredDictionary.Value] = [:]
                    do {
                        try StructuredFieldParser.read(text) {
                            (parser: inout StructuredFieldParser) throws(StructuredDictionary.ParseError) in
                            try parser.dictionaryField(refusingRepeats: false) {
                                (parser: inout StructuredFieldParser, keyRange: Range<Int>) throws(StructuredDictionary.ParseError) in
                                guard let position = wanted.position(of: UnsafeBufferPointer(rebasing: parser.bytes[keyRange])) else {
                                    return try parser.skipMemberValue()
                                }
                                members[wanted[position]] = try parser.memberValue().value
                            }
                        }
                        dictionaries[name] = .success(members)
                    } catch {
                        dictionaries[name] = .failure(.notADictionary)
                    }
                } else {
                    dictionaries[name] = .failure(.absent)
                }
            }
            switch dictionaries[name]! {
            case .failure(.absent): return .absent
            case .failure(.notADictionary): return .notADictionary
            case .success(let members): return members[key].map { .member($0) } ?? .absent
            }
        }
    }

    /// How the base's last line starts; its value is the `@signature-params` text.
    static let signatureParametersLine: StaticString = #""@signature-params": "#

    /// The value of one component, before it is checked for ASCII.
    public static func componentValue(_ component: ComponentIdentifier, request: some SignableRequest) throws(SigningError) -> String {
        var value: [UInt8] = []
        var readings = RequestReadings(covered: [component])
        try appendValue(component, request: request, readings: &readings, to: &value)
        return String(decoding: value, as: UTF8.self)
    }

    private static func appendValue(
        _ component: ComponentIdentifier, request: some SignableRequest, readings: inout RequestReadings, to out: inout [UInt8]
    ) throws(SigningError) {
        if component.isDerived {
            try appendDerivedValue(component, request: request, readings: &readings, to: &out)
        } else {
            out.appendUTF8(try fieldValue(component, request: request, readings: &readings))
        }
    }

    // MARK: Derived components (§2.2)

    private static func appendDerivedValue(
        _ component: ComponentIdentifier, request: some SignableRequest, readings: inout RequestReadings, to out: inout [UInt8]
    ) throws(SigningError) {
        guard let derived = DerivedComponent(component.name) else { throw .unsupportedComponent(component.name) }
        if derived != .queryParameter, !component.parameters.isEmpty {
            let names = component.parameters.map(\.key).joined(separator: ", ")
            throw .unsupportedComponent("\(component) (parameters \(names) do not apply to \(component.name))")
        }
        switch derived {
        case .queryParameter:
            guard component.parameters.count == 1, case .string(let name)? = component.parameter("name") else {
                throw .invalidComponent("@query-param takes exactly one parameter, name=\"…\"")
            }
            guard let parameter = readings.queryParameter(name, request: request) else {
                throw .componentNotInMessage(component.serialized)
            }
            guard parameter.count == 1 else { throw .ambiguousQueryParameter(name) }
            out.appendUTF8(parameter.value)
        case .signatureParameters:
            throw .invalidComponent("@signature-params cannot be a covered component")
        case .status:
            throw .unsupportedComponent("@status (a response component)")
        default:
            appendValue(of: derived, request: request, to: &out)
        }
    }

    /// The value of a derived component that takes no parameters and is always present in a
    /// request (``DerivedComponent/isPlainRequestComponent``): `@method`, `@target-uri`,
    /// `@authority`, `@scheme`, `@request-target`, `@path`, `@query`. (The others are
    /// ``appendDerivedValue(_:request:to:)``'s alone.)
    static func appendValue(of derived: DerivedComponent, request: some SignableRequest, to out: inout some ByteSink) {
        switch derived {
        case .method:
            out.appendUTF8(request.method)
        case .targetURI:
            appendLowercased(request.scheme, to: &out)
            out.appendLiteral("://")
            appendNormalizedAuthority(request, to: &out)
            out.appendUTF8(request.requestTarget)
        case .authority:
            appendNormalizedAuthority(request, to: &out)
        case .scheme:
            appendLowercased(request.scheme, to: &out)
        case .requestTarget:
            out.appendUTF8(request.requestTarget)
        case .path:
            let target = request.requestTarget
            let pathEnd = request.queryOffset ?? target.utf8.count
            if pathEnd == 0 { out.appendByte(UInt8(ascii: "/")) } else { out.appendUTF8(target, offsets: 0..<pathEnd) }
        case .query:
            let target = request.requestTarget
            if let start = request.queryOffset {
                out.appendUTF8(target, offsets: start..<target.utf8.count)
            } else {
                out.appendByte(UInt8(ascii: "?"))
            }
        case .queryParameter, .signatureParameters, .status:
            preconditionFailure("\(derived) is not a parameterless request component")
        }
    }

    /// The derived component names RFC 9421 §2.2 defines, told apart by length first: a `switch`
    /// over the names as strings compared a name with each in turn, for every covered component.
    enum DerivedComponent: UInt8 {
        case method, targetURI, authority, scheme, requestTarget, path, query, queryParameter, signatureParameters, status

        init?(_ name: String) {
            let found: DerivedComponent? =
                switch name.utf8.count {
                case 5: name == "@path" ? .path : nil
                case 6: name == "@query" ? .query : nil
                case 7: name == "@method" ? .method : name == "@scheme" ? .scheme : name == "@status" ? .status : nil
                case 10: name == "@authority" ? .authority : nil
                case 11: name == "@target-uri" ? .targetURI : nil
                case 12: name == "@query-param" ? .queryParameter : nil
                case 15: name == "@request-target" ? .requestTarget : nil
                case 17: name == "@signature-params" ? .signatureParameters : nil
                default: nil
                }
            guard let found else { return nil }
            self = found
        }

        /// Whether it is a request's, takes no parameters and is always present: one
        /// ``SignatureBase/appendValue(of:request:to:)`` writes.
        var isPlainRequestComponent: Bool {
            switch self {
            case .method, .targetURI, .authority, .scheme, .requestTarget, .path, .query: true
            case .queryParameter, .signatureParameters, .status: false
            }
        }
    }

    /// Host lowercased, with the scheme's default port left out (RFC 9421 §2.2.3).
    static func normalizedAuthority(_ request: some SignableRequest) -> String {
        var bytes: [UInt8] = []
        appendNormalizedAuthority(request, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func appendNormalizedAuthority(_ request: some SignableRequest, to out: inout some ByteSink) {
        var authority = request.authority
        authority.withUTF8 { bytes in
            var end = bytes.count
            // A default port ends with its scheme's digits; only then is the scheme looked at.
            if let last = bytes.last, last == UInt8(ascii: "0") || last == UInt8(ascii: "3") {
                let defaultPort: StaticString = isHTTPS(request.scheme) ? ":443" : ":80"
                let port = UnsafeBufferPointer(start: defaultPort.utf8Start, count: defaultPort.utf8CodeUnitCount)
                if bytes.count >= port.count, UnsafeBufferPointer(rebasing: bytes[(bytes.count - port.count)...]).elementsEqual(port) {
                    end -= port.count
                }
            }
            appendLowercased(UnsafeBufferPointer(rebasing: bytes[..<end]), to: &out)
        }
    }

    private static func isHTTPS(_ scheme: String) -> Bool {
        // As written almost always; any other spelling is compared byte by byte.
        if scheme == "https" { return true }
        guard scheme.utf8.count == 5 else { return false }
        return zip(scheme.utf8, "https".utf8).allSatisfy { lowercased($0) == $1 }
    }

    private static func appendLowercased(_ text: String, to out: inout some ByteSink) {
        var text = text
        text.withUTF8 { appendLowercased($0, to: &out) }
    }

    private static func appendLowercased(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout some ByteSink) {
        guard bytes.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else { return out.appendBytes(bytes) }
        for byte in bytes { out.appendByte(lowercased(byte)) }
    }

    @inline(__always)
    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    // MARK: Header fields (§2.1)

    private static func fieldValue(
        _ component: ComponentIdentifier, request: some SignableRequest, readings: inout RequestReadings
    ) throws(SigningError) -> String {
        var byteSequence = false
        var dictionaryKey: String?
        for (key, value) in component.parameters {
            switch (key, value) {
            case ("bs", .bool(true)): byteSequence = true
            case ("key", .string(let member)): dictionaryKey = member
            case ("sf", _), ("req", _), ("tr", _): throw .unsupportedComponent("\(component) (the \(key) parameter)")
            default: throw .invalidComponent("\(component): unknown parameter \(key)")
            }
        }
        if byteSequence && dictionaryKey != nil {
            throw .invalidComponent("\(component): bs and key cannot be combined")
        }
        if let dictionaryKey {
            // Read and parsed once per field, however many of its members are covered.
            let found = readings.dictionaryMember(dictionaryKey, field: component.name) {
                let lines = request.fieldValues(component.name)
                return lines.isEmpty ? nil : lines.map(trimmingWhitespace).joined(separator: ", ")
            }
            return try dictionaryMember(found, key: dictionaryKey, component: component)
        }
        // The usual case, one line: no arrays to make, map and join.
        if !byteSequence, let only = request.onlyFieldValue(component.name) { return trimmingWhitespace(only) }
        let lines = request.fieldValues(component.name)
        guard !lines.isEmpty else { throw .componentNotInMessage(component.serialized) }
        let trimmed = lines.map(trimmingWhitespace)
        if byteSequence {
            return trimmed.map { ":" + Data($0.utf8).base64EncodedString() + ":" }.joined(separator: ", ")
        }
        return trimmed.joined(separator: ", ")
    }

    private static func dictionaryMember(
        _ found: RequestReadings.DictionaryMember, key: String, component: ComponentIdentifier
    ) throws(SigningError) -> String {
        let member: StructuredDictionary.Value
        switch found {
        case .notADictionary:
            throw .malformedField(field: component.name, reason: "it is not a structured dictionary, so key=\"\(key)\" cannot apply")
        case .absent:
            throw .componentNotInMessage(component.serialized)
        case .member(let value):
            member = value
        }
        var bytes: [UInt8] = []
        do {
            try StructuredFieldWriter.appendMemberValue(member, to: &bytes)
        } catch {
            throw .malformedField(field: component.name, reason: "the member \(key) cannot be serialised")
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The value without leading and trailing spaces and tabs (RFC 9421 §2.1 step 2); usually
    /// there are none, and the value is returned as is.
    static func trimmingWhitespace(_ value: String) -> String {
        let utf8 = value.utf8
        guard let first = utf8.first, let last = utf8.last else { return value }
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard isSpace(first) || isSpace(last) else { return value }
        guard let start = utf8.firstIndex(where: { !isSpace($0) }), let end = utf8.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(value[start...end])
    }

    /// Visible ASCII, space and tab only: anything else could not be rebuilt byte for byte, and a
    /// line break would let a value forge a line of its own.
    private static func requireASCII(_ value: ArraySlice<UInt8>, component: ComponentIdentifier) throws(SigningError) {
        guard value.withUnsafeBufferPointer(isVisibleASCII) else { throw .nonASCIIValue(component.serialized) }
    }

    /// Whether every byte is visible ASCII, a space or a tab. Eight bytes at a time: a word with
    /// no byte below 0x20, none from 0x7F up, passes at once; any other word (one holding a tab, or
    /// flagged by a borrow between bytes) is checked byte by byte.
    static func isVisibleASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let isAllowed = { (byte: UInt8) in byte == 0x09 || (byte >= 0x20 && byte <= 0x7E) }
        let raw = UnsafeRawBufferPointer(bytes)
        var index = 0
        while index + 8 <= raw.count {
            let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            let highBits: UInt64 = 0x8080_8080_8080_8080
            let below20 = (word &- 0x2020_2020_2020_2020) & ~word & highBits
            let delete = word ^ 0x7F7F_7F7F_7F7F_7F7F  // zero where a byte is 0x7F
            let is7F = (delete &- 0x0101_0101_0101_0101) & ~delete & highBits
            if (word & highBits) | below20 | is7F != 0 {
                for offset in index..<(index + 8) where !isAllowed(bytes[offset]) { return false }
            }
            index += 8
        }
        for offset in index..<raw.count where !isAllowed(bytes[offset]) { return false }
        return true
    }
}
