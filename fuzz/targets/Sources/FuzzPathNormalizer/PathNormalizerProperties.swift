import Portico

/// What must hold for every path the normaliser accepts or refuses.
enum PathNormalizerProperties {
    static func checkAccepted(_ normalized: PathNormalizer.Normalized, input: String) {
        let output = Array(normalized.path.utf8)
        // Normalising twice changes nothing: routes and backends see one form.
        guard case .success(let again) = PathNormalizer.normalize(normalized.path) else {
            preconditionFailure("a normalised path is refused when normalised again: \(normalized.path)")
        }
        precondition(again == normalized, "normalising twice changed \(normalized.path) into \(again.path)")
        // No dot-segment, raw backslash, fragment or encoded NUL survives, in any encoding; nor a
        // dot-segment before a path parameter (`..;x`, `.%3Bx`), which some servers strip first.
        for segment in output.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            let beforeParameters = decoded(Array(segment)).split(
                separator: UInt8(ascii: ";"), maxSplits: 1, omittingEmptySubsequences: false)[0]
            precondition(
                beforeParameters.elementsEqual(".".utf8) == false && beforeParameters.elementsEqual("..".utf8) == false,
                "a dot-segment was accepted")
        }
        precondition(!output.contains(UInt8(ascii: "\\")), "a backslash was accepted")
        precondition(!output.contains(UInt8(ascii: "#")), "a fragment was accepted")
        // What the path spells is UTF-8: no overlong, surrogate or truncated sequence.
        precondition(String(validating: decoded(output), as: UTF8.self) != nil, "bytes that are not UTF-8 were accepted")
        // What stays encoded is well-formed, uppercase, and not an unreserved character.
        var encodedSlash = false
        var index = 0
        while index < output.count {
            defer { index += 1 }
            guard output[index] == UInt8(ascii: "%") else { continue }
            precondition(index + 2 < output.count, "a truncated percent-encoding was accepted")
            guard let byte = decodeUppercaseHex(output[index + 1], output[index + 2]) else {
                preconditionFailure("percent-encoding that is not two uppercase hex digits was accepted")
            }
            precondition(byte != 0, "an encoded NUL was accepted")
            precondition(!isUnreserved(byte), "an encoded unreserved character was left encoded")
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "\\") { encodedSlash = true }
            index += 2
        }
        precondition(encodedSlash == normalized.hasEncodedSlash, "hasEncodedSlash does not say whether %2F or %5C is in the path")
        // Normalising only decodes what needs no encoding: the segments and their decoded bytes stay.
        let inputBytes = Array(input.utf8)
        precondition(
            output.filter { $0 == UInt8(ascii: "/") }.count == inputBytes.filter { $0 == UInt8(ascii: "/") }.count,
            "normalising added or removed a segment")
        precondition(decoded(output) == decoded(inputBytes), "normalising changed what the path means")
        if !inputBytes.contains(UInt8(ascii: "%")) {
            precondition(output == inputBytes, "a path without percent-encoding was rewritten")
        }
    }

    /// A refusal is for a reason the input really has.
    static func checkRefused(_ rejection: PathNormalizer.Rejection, input: String) {
        let bytes = Array(input.utf8)
        switch rejection {
        case .backslash: precondition(bytes.contains(UInt8(ascii: "\\")), "refused for a backslash it does not have")
        case .invalidPercentEncoding, .encodedNul:
            precondition(bytes.contains(UInt8(ascii: "%")), "refused for an encoding it does not have")
        case .dotSegment:
            precondition(bytes.contains(UInt8(ascii: ".")) || bytes.contains(UInt8(ascii: "%")), "refused for a dot it does not have")
        case .fragment: precondition(bytes.contains(UInt8(ascii: "#")), "refused for a '#' it does not have")
        case .invalidUTF8:
            // A String holds valid UTF-8, so only percent-encoded bytes can be invalid.
            precondition(bytes.contains(UInt8(ascii: "%")), "refused as not UTF-8 without any encoded byte")
        }
    }

    private static func decodeUppercaseHex(_ high: UInt8, _ low: UInt8) -> UInt8? {
        func value(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        guard let high = value(high), let low = value(low) else { return nil }
        return high << 4 | low
    }

    /// Every `%XX` decoded (either case), everything else as is.
    private static func decoded(_ bytes: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = hexDigit(bytes[index + 1]), let low = hexDigit(bytes[index + 2])
            {
                result.append(high << 4 | low)
                index += 3
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return result
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// RFC 3986 §2.3's unreserved characters, written out again here rather than taken from the
    /// normaliser, so that the property does not trust the code it checks.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}
