import PorticoHTTP
import RawStructuredFieldValues

/// A structured-field dictionary (RFC 9651 §4.2.2) read whole by ``StructuredFieldParser``: what
/// `Content-Digest` and a `;key=` component's field are read with, and the reading the signature
/// fields' own one (``SignatureFields/select(label:signatureInput:signature:)``) is tested against.
///
/// Values are the library's bare items (`RFC9651BareItem`), so the module and the client library
/// keep one vocabulary, in plain arrays rather than the library's ordered maps, which cost an
/// allocation per growth step. Its results are checked against the library's parser on every
/// input the property test generates.
struct StructuredDictionary {
    /// An item with its parameters, in the order written (a repeated key keeps its first place and
    /// its last value, as RFC 9651 says).
    struct Item {
        var bareItem: RFC9651BareItem
        var parameters: [(key: String, value: RFC9651BareItem)]
    }

    /// A member's value.
    enum Value {
        case item(Item)
        case innerList([Item], parameters: [(key: String, value: RFC9651BareItem)])
    }

    /// The members in order, each with its text as received when that text is already the member's
    /// canonical serialisation (RFC 9651 §4.1), else nil; the text is kept for inner lists only.
    ///
    /// A verifier rebuilds `@signature-params` from the `Signature-Input` member it parsed. When
    /// the signer wrote the member canonically, as signers do, the received text is that line, and
    /// copying it saves serialising the list again. The parser tracks what serialising would change
    /// (extra spaces, `=?1`, leading zeros, decimals, display strings, repeated parameters) and
    /// keeps no text when it sees any of it; the property test checks every kept text against the
    /// serialiser.
    var members: [(key: String, value: Value, canonicalRange: Range<Int>?)] = []

    /// The field value parsed: the canonical texts are slices of it (no copy).
    let source: String

    /// The canonical text of the member under `key` (see ``members``): a slice of the field's value.
    func canonicalText(of key: String) -> Substring? {
        guard let range = members.first(where: { $0.key == key })?.canonicalRange else { return nil }
        return source.utf8Slice(range)
    }

    /// Why a value is not a dictionary, and at which byte.
    struct ParseError: Error, CustomStringConvertible {
        var reason: String
        var offset: Int
        /// Set when the reason is a key that occurs twice at the top level.
        var duplicateKey: String?
        var description: String { "\(reason) (at byte \(offset))" }
    }

    /// The member under `key`.
    subscript(key: String) -> Value? {
        members.first { $0.key == key }?.value
    }

    /// Parses a whole field value, as received (lines already joined with ", ").
    ///
    /// Throws ``ParseError`` for anything RFC 9651 rejects, and for a key that occurs twice at the
    /// top level (its `duplicateKey` is then set).
    static func parse(_ value: String, limits: StructuredFieldParser.Limits = .unbounded) throws(ParseError) -> StructuredDictionary {
        var dictionary = StructuredDictionary(source: value)
        try StructuredFieldParser.read(value, limits: limits) { (parser: inout StructuredFieldParser) throws(ParseError) in
            try parser.dictionaryField { (parser: inout StructuredFieldParser, key: Range<Int>) throws(ParseError) in
                let (member, canonicalRange) = try parser.memberValue()
                dictionary.members.append((parser.string(key), member, canonicalRange))
            }
        }
        return dictionary
    }
}
