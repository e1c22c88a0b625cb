import Foundation
import RawStructuredFieldValues

/// The signature base (RFC 9421 §2.5): one line per covered component, `"name";params: value`,
/// then the `@signature-params` line. This is the exact text the HMAC is computed over.
public enum SignatureBase {
    /// Builds the signature base of `input` over `request`.
    ///
    /// Throws when a covered component is absent from the request, not supported, or has a value
    /// that is not ASCII (a signer must refuse such a request rather than sign something the
    /// verifier cannot rebuild).
    public static func make(for input: SignatureInput, request: some SignableRequest) throws(SigningError) -> String {
        var base = ""
        base.reserveCapacity(64 * (input.components.count + 1))
        for component in input.components {
            let value = try componentValue(component, request: request)
            try requireASCII(value, component: component)
            base += component.serialized
            base += ": "
            base += value
            base += "\n"
        }
        base += "\"@signature-params\": "
        base += try input.serialized()
        return base
    }

    /// The value of one component, before it is checked for ASCII.
    public static func componentValue(_ component: ComponentIdentifier, request: some SignableRequest) throws(SigningError) -> String {
        if component.isDerived {
            return try derivedValue(component, request: request)
        }
        return try fieldValue(component, request: request)
    }

    // MARK: Derived components (§2.2)

    private static func derivedValue(_ component: ComponentIdentifier, request: some SignableRequest) throws(SigningError) -> String {
        if component.name != "@query-param", !component.parameters.isEmpty {
            let names = component.parameters.map(\.key).joined(separator: ", ")
            throw .unsupportedComponent("\(component) (parameters \(names) do not apply to \(component.name))")
        }
        let target = request.requestTarget
        let queryStart = target.firstIndex(of: "?")
        switch component.name {
        case "@method":
            return request.method
        case "@target-uri":
            return request.scheme.lowercased() + "://" + normalizedAuthority(request) + target
        case "@authority":
            return normalizedAuthority(request)
        case "@scheme":
            return request.scheme.lowercased()
        case "@request-target":
            return target
        case "@path":
            let path = queryStart.map { target[..<$0] } ?? target[...]
            return path.isEmpty ? "/" : String(path)
        case "@query":
            return queryStart.map { String(target[$0...]) } ?? "?"
        case "@query-param":
            guard component.parameters.count == 1, case .string(let name)? = component.parameter("name") else {
                throw .invalidComponent("@query-param takes exactly one parameter, name=\"…\"")
            }
            let query = queryStart.map { target[target.index(after: $0)...] } ?? ""
            let matches = QueryParameters.encodedPairs(query).filter { $0.name == name }
            guard let first = matches.first else { throw .componentNotInMessage(component.serialized) }
            guard matches.count == 1 else { throw .ambiguousQueryParameter(name) }
            return first.value
        case "@signature-params":
            throw .invalidComponent("@signature-params cannot be a covered component")
        case "@status":
            throw .unsupportedComponent("@status (a response component)")
        default:
            throw .unsupportedComponent(component.name)
        }
    }

    /// Host lowercased, with the scheme's default port left out (RFC 9421 §2.2.3).
    static func normalizedAuthority(_ request: some SignableRequest) -> String {
        let raw = request.authority
        let authority = raw.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) ? raw.lowercased() : raw
        let defaultPort = request.scheme.lowercased() == "https" ? ":443" : ":80"
        if authority.hasSuffix(defaultPort) {
            return String(authority.dropLast(defaultPort.count))
        }
        return authority
    }

    // MARK: Header fields (§2.1)

    private static func fieldValue(_ component: ComponentIdentifier, request: some SignableRequest) throws(SigningError) -> String {
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
        let lines = request.fieldValues(component.name)
        guard !lines.isEmpty else { throw .componentNotInMessage(component.serialized) }
        let trimmed = lines.map(trimmingWhitespace)
        if byteSequence {
            return trimmed.map { ":" + Data($0.utf8).base64EncodedString() + ":" }.joined(separator: ", ")
        }
        let combined = trimmed.joined(separator: ", ")
        guard let dictionaryKey else { return combined }
        return try dictionaryMember(combined, key: dictionaryKey, component: component)
    }

    private static func dictionaryMember(_ value: String, key: String, component: ComponentIdentifier) throws(SigningError) -> String {
        var parser = StructuredFieldValueParser(Array(value.utf8))
        guard let dictionary = try? parser.parseDictionaryFieldValue() else {
            throw .malformedField(field: component.name, reason: "it is not a structured dictionary, so key=\"\(key)\" cannot apply")
        }
        guard let member = dictionary[key] else { throw .componentNotInMessage(component.serialized) }
        var serializer = StructuredFieldValueSerializer()
        let bytes: [UInt8]?
        switch member {
        case .item(let item): bytes = try? serializer.writeItemFieldValue(item)
        case .innerList: bytes = try? serializer.writeListFieldValue([member])
        }
        guard let bytes else { throw .malformedField(field: component.name, reason: "the member \(key) cannot be serialised") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The value without leading and trailing spaces and tabs (RFC 9421 §2.1 step 2); usually
    /// there are none, and the value is returned as is.
    private static func trimmingWhitespace(_ value: String) -> String {
        let utf8 = value.utf8
        guard let first = utf8.first, let last = utf8.last else { return value }
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard isSpace(first) || isSpace(last) else { return value }
        guard let start = utf8.firstIndex(where: { !isSpace($0) }), let end = utf8.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(value[start...end])
    }

    /// Visible ASCII, space and tab only: anything else could not be rebuilt byte for byte, and a
    /// line break would let a value forge a line of its own.
    private static func requireASCII(_ value: String, component: ComponentIdentifier) throws(SigningError) {
        for byte in value.utf8 where !(byte == 0x09 || (0x20...0x7E).contains(byte)) {
            throw .nonASCIIValue(component.serialized)
        }
    }
}
