import Foundation

/// Why the service locator could not answer.
public struct ServiceLocatorError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Reason: Sendable, Hashable {
        case unreachable, httpStatus, invalidDocument, unknownEndpoint, invalidSignature, invalidKey
    }

    private let reason: Reason
    /// Words for a log line: what failed and, where known, why.
    public let detail: String
    /// For a document whose valid signature was created ahead of the device clock: that moment,
    /// the gateway's own time, which a client whose clock is behind can correct it by.
    public let signedTime: Date?
    /// For ``unreachable``: what the transport threw (a `URLError` with the default transport).
    public let underlying: (any Error)?

    private init(_ reason: Reason, _ detail: String, signedTime: Date? = nil, underlying: (any Error)? = nil) {
        self.reason = reason
        self.detail = detail
        self.signedTime = signedTime
        self.underlying = underlying
    }

    /// The document could not be fetched (no connection, a timeout, TLS failure).
    public static let unreachable = ServiceLocatorError(.unreachable, "")
    /// The locator answered with a status other than 200 or 304.
    public static let httpStatus = ServiceLocatorError(.httpStatus, "")
    /// The document is not valid JSON or does not have the locator's shape.
    public static let invalidDocument = ServiceLocatorError(.invalidDocument, "")
    /// The document (even after a refresh) does not list the requested service and version.
    public static let unknownEndpoint = ServiceLocatorError(.unknownEndpoint, "")
    /// A key is pinned and the document is unsigned, altered, expired or signed by another key.
    public static let invalidSignature = ServiceLocatorError(.invalidSignature, "")

    /// The key given to pin (``PinnedLocatorKey``) is malformed: not base64url, or not a 32-byte
    /// Ed25519 public key. A mistake in the app, not a document refused.
    public static let invalidKey = ServiceLocatorError(.invalidKey, "")

    static func invalidKey(_ reason: String) -> ServiceLocatorError {
        ServiceLocatorError(.invalidKey, "the pinned locator key is malformed: \(reason)")
    }

    static func unreachable(_ error: any Error) -> ServiceLocatorError {
        ServiceLocatorError(.unreachable, "the service locator could not be fetched: \(error)", underlying: error)
    }

    static func httpStatus(_ status: Int) -> ServiceLocatorError {
        ServiceLocatorError(.httpStatus, "the service locator answered HTTP \(status)")
    }

    static func invalidDocument(_ reason: String) -> ServiceLocatorError {
        ServiceLocatorError(.invalidDocument, "the service locator document is invalid: \(reason)")
    }

    static func invalidSignature(_ reason: String) -> ServiceLocatorError {
        ServiceLocatorError(.invalidSignature, "the service locator document was refused: \(reason)")
    }

    static func createdInTheFuture(created: Int64, now: Int64) -> ServiceLocatorError {
        ServiceLocatorError(
            .invalidSignature, "the service locator document was refused: the signature was created in the future (\(created), now \(now))",
            signedTime: Date(timeIntervalSince1970: TimeInterval(created)))
    }

    static func unknownEndpoint(service: String, version: String) -> ServiceLocatorError {
        ServiceLocatorError(.unknownEndpoint, "the service locator lists no \(service) version \(version)")
    }

    static func noActiveEndpoint(service: String) -> ServiceLocatorError {
        ServiceLocatorError(
            .unknownEndpoint, "the service locator lists no \(service), or no URL at which the gateway chooses its version; name a version")
    }

    public var description: String { detail.isEmpty ? "\(reason)" : detail }

    /// Same reason, whatever the detail, so that `error == .unknownEndpoint` reads naturally.
    public static func == (lhs: ServiceLocatorError, rhs: ServiceLocatorError) -> Bool { lhs.reason == rhs.reason }
    public func hash(into hasher: inout Hasher) { hasher.combine(reason) }
}
