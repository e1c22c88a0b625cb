import PorticoSigning

/// Why a request could not be signed.
///
/// A struct over a private enum, so that a new reason is not a breaking change; compare with the
/// static members (`error == .invalidURL`) or read ``underlying`` for the signing module's reason.
public struct ClientSigningError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Reason: Sendable, Hashable {
        case invalidURL
        case bodyStream
        case cannotSign
    }

    private let reason: Reason
    /// What the RFC 9421 code objected to, when that is the reason (e.g. a covered field whose value
    /// is not ASCII).
    public let underlying: SigningError?
    private let detail: String

    private init(_ reason: Reason, underlying: SigningError? = nil, detail: String) {
        self.reason = reason
        self.underlying = underlying
        self.detail = detail
    }

    /// The URL is not an absolute `http` or `https` URL with a host.
    public static let invalidURL = ClientSigningError(.invalidURL, detail: "")
    /// A `URLRequest` whose body is a stream: the body must be known to compute its digest.
    public static let bodyStream = ClientSigningError(.bodyStream, detail: "")

    static func badURL(_ url: String) -> ClientSigningError {
        ClientSigningError(.invalidURL, detail: "expected an absolute http:// or https:// URL with a host, found \(url)")
    }

    static let streamedBody = ClientSigningError(
        .bodyStream, detail: "the request body is a stream; set httpBody so that its Content-Digest can be computed")

    static func cannotSign(_ error: SigningError) -> ClientSigningError {
        ClientSigningError(.cannotSign, underlying: error, detail: error.description)
    }

    public var description: String {
        detail.isEmpty ? "\(reason)" : "cannot sign this request: \(detail)"
    }

    /// Same reason; the detail text does not take part, so `error == .invalidURL` matches any URL.
    public static func == (lhs: ClientSigningError, rhs: ClientSigningError) -> Bool {
        lhs.reason == rhs.reason && lhs.underlying == rhs.underlying
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(reason)
        hasher.combine(underlying?.description)
    }
}
