import RawStructuredFieldValues

/// Serialises structured-field values (RFC 9651 §4.1) straight into a byte array: the component
/// identifiers and the `@signature-params` line of a signature base, and `Signature-Input`.
///
/// Signer and verifier both build the base with it, so they cannot disagree on a byte; the
/// property test checks its output against the structured-headers library's serializer. Going
/// through the library instead cost a serializer, an ordered map and a `String` per line.
enum StructuredFieldWriter {
    /// `;key=value` for each parameter, in order; `;key` alone for a true boolean (§4.1.1.2).
    static func appendParameters(_ parameters: [(key: String, value: RFC9651BareItem)], to out: inout [UInt8]) throws(SigningError) {
        for (key, value) in parameters {
            out.append(UInt8(ascii: ";"))
            try appendKey(key, to: &out)
            if case .bool(true) = value { continue }
            out.append(UInt8(ascii: "="))
            try appendBareItem(value, to: &out)
        }
    }

    /// §4.1.1.3: a lowercase letter or `*`, then lowercase letters, digits, `_-.*`.
    static func appendKey(_ key: String, to out: inout [UInt8]) throws(SigningError) {
        var isFirst = true
        for byte in key.utf8 {
            let valid = isFirst ? StructuredFieldBytes.isKeyStart(byte) : StructuredFieldBytes.isKeyByte(byte)
            guard valid else { throw .invalidParameter("\"\(key)\" is not a valid structured-field key") }
            isFirst = false
        }
        guard !isFirst else { throw .invalidParameter("a structured-field key cannot be empty") }
        out.appendUTF8(key)
    }

    /// A dictionary member's value (§4.1.2): an item or an inner list, each with its parameters.
    static func appendMemberValue(_ value: StructuredDictionary.Value, to out: inout [UInt8]) throws(SigningError) {
        switch value {
        case .item(let item):
            try appendBareItem(item.bareItem, to: &out)
            try appendParameters(item.parameters, to: &out)
        case .innerList(let items, let parameters):
            out.append(UInt8(ascii: "("))
            for (offset, item) in items.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: " ")) }
                try appendBareItem(item.bareItem, to: &out)
                try appendParameters(item.parameters, to: &out)
            }
            out.append(UInt8(ascii: ")"))
            try appendParameters(parameters, to: &out)
        }
    }

    /// §4.1.3.1
    static func appendBareItem(_ item: RFC9651BareItem, to out: inout [UInt8]) throws(SigningError) {
        switch item {
        case .integer(let value):
            guard abs(value) <= 999_999_999_999_999 else {
                throw .invalidParameter("\(value) is out of a structured-field integer's range")
            }
            appendDecimalDigits(of: value, to: &out)
        case .string(let value):
            try appendString(value, to: &out)
        case .token(let value):
            try appendToken(value, to: &out)
        case .undecodedByteSequence(let value):
            for byte in value.utf8 where !StructuredFieldBytes.isBase64Byte(byte) {
                throw .invalidParameter("a structured-field byte sequence must be base64")
            }
            out.append(UInt8(ascii: ":"))
            out.appendUTF8(value)
            out.append(UInt8(ascii: ":"))
        case .bool(let value):
            out.append(UInt8(ascii: "?"))
            out.append(value ? UInt8(ascii: "1") : UInt8(ascii: "0"))
        case .date(let value):
            guard abs(value) <= 999_999_999_999_999 else { throw .invalidParameter("\(value) is out of a structured-field date's range") }
            out.append(UInt8(ascii: "@"))
            appendDecimalDigits(of: value, to: &out)
        case .decimal, .displayString:
            // Rare in signatures; the library's serializer has the rounding and escaping rules.
            var serializer = StructuredFieldValueSerializer()
            do {
                out.append(contentsOf: try serializer.writeItemFieldValue(Item(bareItem: item, parameters: OrderedMap())))
            } catch {
                throw .invalidParameter("the value cannot be serialised as a structured field (\(error))")
            }
        }
    }

    /// §4.1.6: quoted, with `"` and `\` escaped; visible ASCII and spaces only.
    static func appendString(_ value: String, to out: inout [UInt8]) throws(SigningError) {
        var value = value
        let valid = value.withUTF8 { bytes in
            var escapes = 0
            for byte in bytes {
                guard byte >= 0x20 && byte <= 0x7E else { return false }
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { escapes += 1 }
            }
            out.append(UInt8(ascii: "\""))
            if escapes == 0 {
                out.append(contentsOf: bytes)
            } else {
                for byte in bytes {
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                    out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
            return true
        }
        guard valid else { throw .invalidParameter("a structured-field string can hold only visible ASCII and spaces") }
    }

    /// §4.1.7: a letter or `*`, then tchar, `:` and `/`.
    private static func appendToken(_ token: String, to out: inout [UInt8]) throws(SigningError) {
        var isFirst = true
        for byte in token.utf8 {
            let valid = isFirst ? StructuredFieldBytes.isTokenStart(byte) : StructuredFieldBytes.isTokenByte(byte)
            guard valid else { throw .invalidParameter("\"\(token)\" is not a valid structured-field token") }
            isFirst = false
        }
        guard !isFirst else { throw .invalidParameter("a structured-field token cannot be empty") }
        out.appendUTF8(token)
    }

    static func appendDecimalDigits(of value: Int64, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            for index in stride(from: count - 1, through: 0, by: -1) { out.append(buffer[index]) }
        }
    }
}
