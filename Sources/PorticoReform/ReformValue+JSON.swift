import Foundation

extension ReformValue {
    /// A source's JSON body, read by Foundation's `JSONSerialization` (RFC 8259, except that it
    /// tolerates one trailing comma; its own bound on nesting) and turned into a ``ReformValue``.
    ///
    /// `JSONSerialization` rather than `JSONDecoder`: decoding an unknown document through
    /// `Decodable` means trying each kind in turn, a thrown error per miss, which made the decoding
    /// most of a one-source facade request's CPU (`bench/facade.sh`). The conversion keeps what a
    /// contract needs: booleans apart from numbers (on Linux both come as `NSNumber`; a boolean is
    /// Foundation's boolean class), integers (no fraction or exponent, within `Int64`) apart from
    /// other numbers, and an object's members sorted by name.
    static func readJSON(_ body: Data) throws(ReformError) -> ReformValue {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw ReformError(.malformed(format: .json, detail: detail ?? "\(error)"))
        }
        return converted(object)
    }

    /// The class of Foundation's `true` and `false`.
    private static let booleanClass = ObjectIdentifier(type(of: NSNumber(value: true)))

    private static func converted(_ object: Any) -> ReformValue {
        switch object {
        case let number as NSNumber:
            if ObjectIdentifier(type(of: number)) == booleanClass { return .boolean(number.boolValue) }
            // Integers are read as signed 64-bit ("q") when they fit; anything else is a Double.
            switch UInt8(bitPattern: number.objCType.pointee) {
            case UInt8(ascii: "q"), UInt8(ascii: "l"), UInt8(ascii: "i"), UInt8(ascii: "s"), UInt8(ascii: "c"):
                return .integer(number.int64Value)
            default:
                return .number(number.doubleValue)
            }
        case let string as String:
            return .string(string)
        case let array as [Any]:
            return .array(array.map(converted))
        case let dictionary as [String: Any]:
            return .object(dictionary.sorted { $0.key < $1.key }.map { ($0.key, converted($0.value)) })
        default:
            return .null
        }
    }
}
