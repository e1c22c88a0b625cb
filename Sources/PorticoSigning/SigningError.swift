/// Why a message could not be signed or a signature could not be checked.
///
/// Each case says what an honest client got wrong, in words it can act on; none carries a secret,
/// and none says whether a key id exists (that is the verifier's business, not this module's).
public enum SigningError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A structured field (`Signature-Input`, `Signature`, `Content-Digest`) could not be parsed.
    case malformedField(field: String, reason: String)
    /// The same label appears twice in `Signature-Input` or `Signature`.
    case duplicateLabel(field: String, label: String)
    /// The chosen label is in one of `Signature-Input` and `Signature` but not the other.
    case labelMismatch(label: String)
    /// No signature under the expected label.
    case missingLabel(String)
    /// A covered component identifier is malformed (not lowercase, repeated, bad parameters).
    case invalidComponent(String)
    /// A covered component names a derived component or parameter this implementation does not
    /// compute for requests (`@status`, `sf`, `req`, `tr`).
    case unsupportedComponent(String)
    /// A covered component is not present in the message (a header field that was not sent, a
    /// query parameter that is absent).
    case componentNotInMessage(String)
    /// A query parameter named by `@query-param` occurs more than once (RFC 9421 §2.2.8 forbids
    /// covering it then).
    case ambiguousQueryParameter(String)
    /// A component value holds bytes outside visible ASCII, which a signature base cannot carry.
    case nonASCIIValue(String)
    /// A signature parameter has the wrong type (e.g. `created` not an integer).
    case invalidParameter(String)
    /// The signature covers more components than the verifier reads (its `limit`).
    case tooManyComponents(limit: Int)
    /// The signature base would be longer than the verifier builds (its `limit`, in bytes).
    case baseTooLarge(limit: Int)

    public var description: String {
        switch self {
        case .malformedField(let field, let reason): "\(field) is not a valid structured field: \(reason)"
        case .duplicateLabel(let field, let label): "\(field) holds the label \"\(label)\" more than once"
        case .labelMismatch(let label): "the label \"\(label)\" must appear in both Signature-Input and Signature"
        case .missingLabel(let label): "no signature labelled \"\(label)\""
        case .invalidComponent(let reason): "invalid covered component: \(reason)"
        case .unsupportedComponent(let name): "the covered component \(name) is not supported on requests"
        case .componentNotInMessage(let name): "the covered component \(name) is not present in the request"
        case .ambiguousQueryParameter(let name): "the query parameter \"\(name)\" occurs more than once, so it cannot be covered alone"
        case .nonASCIIValue(let name): "the value of \(name) is not ASCII; a signature base can only carry ASCII"
        case .invalidParameter(let reason): "invalid signature parameter: \(reason)"
        case .tooManyComponents(let limit): "the signature covers more than \(limit) components, the most this verifier reads"
        case .baseTooLarge(let limit): "the signature base would be longer than \(limit) bytes, the most this verifier builds"
        }
    }
}
