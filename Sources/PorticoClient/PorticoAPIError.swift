/// Why a ``PorticoAPI`` call did not return a value.
///
/// Gateway answers and transport failures are kept apart: ``transport`` means no HTTP answer
/// arrived (no network, TLS, a timeout), and may be retried by the app; every other reason carries
/// what the gateway said. Like the library's other errors it is a struct over a private enum, so a
/// new reason is not a breaking change; compare with the static members, which match any
/// instance of the reason:
///
/// ```swift
/// do {
///     quote = try await api.get("stockQuote", path: "/AAPL", as: Quote.self)
/// } catch let error where error == .upgradeRequired {
///     showUpdatePrompt(title: error.problem?.title, message: error.problem?.detail)
/// } catch let error where error == .rateLimited {
///     retryLater(after: error.retryAfter)
/// } catch {
///     showFailure(error)  // end with a plain catch: Swift 6.3.1 crashes compiling a chain that rethrows
/// }
/// ```
///
/// No description or detail holds the app's secret or a credentials value.
public struct PorticoAPIError: Error, CustomStringConvertible, Equatable {
    private enum Reason: Sendable, Hashable {
        case upgradeRequired, rateLimited, unavailable, unauthorized, forbidden, problem, httpStatus
        case transport, locator, signing, credentials, encoding, decoding, invalidRequest, cancelled, unsupported
    }

    private let reason: Reason
    /// The HTTP status of the gateway's answer; `nil` when there was none.
    public let status: Int?
    /// The answer's problem+json body, when it had one.
    public let problem: APIProblem?
    /// For 429 and 503: how long the gateway asked to wait (`Retry-After`).
    public let retryAfter: Duration?
    /// What failed underneath: a `URLError` for ``transport``, a ``ServiceLocatorError`` for
    /// ``locator``, a ``ClientSigningError`` for ``signing``, a `DecodingError` for ``decoding``,
    /// the app's own error for ``credentials``.
    public let underlying: (any Error)?
    private let detail: String

    private init(
        _ reason: Reason, status: Int? = nil, problem: APIProblem? = nil, retryAfter: Duration? = nil, underlying: (any Error)? = nil,
        detail: String = ""
    ) {
        self.reason = reason
        self.status = status
        self.problem = problem
        self.retryAfter = retryAfter
        self.underlying = underlying
        self.detail = detail
    }

    /// 426: the app is older than the service's minimum version. The problem's `title` and
    /// `detail` are written for the user: show them with an update button.
    public static let upgradeRequired = PorticoAPIError(.upgradeRequired)
    /// 429: a rate limit refused the request; ``retryAfter`` says when to try again.
    public static let rateLimited = PorticoAPIError(.rateLimited)
    /// 503: the gateway or a backend is saturated or going down; ``retryAfter`` when it said.
    public static let unavailable = PorticoAPIError(.unavailable)
    /// 401: the request did not authenticate (a wrong secret, a clock too far off, a replayed or
    /// expired signature, an invalid token…). ``APIProblem/kind`` says which, as one of
    /// ``APIProblem/Kind``'s constants.
    public static let unauthorized = PorticoAPIError(.unauthorized)
    /// 403: the credentials are genuine but may not do this (a revoked key, a service the key may
    /// not call, an address not allowed, a token without the scope). ``APIProblem/kind`` says which.
    public static let forbidden = PorticoAPIError(.forbidden)
    /// Any other refusal with a problem+json body: branch on `problem.type`.
    public static let problem = PorticoAPIError(.problem)
    /// A non-2xx answer without a problem body (a backend's own error page, say).
    public static let httpStatus = PorticoAPIError(.httpStatus)
    /// No HTTP answer arrived: no connection, TLS, a timeout.
    public static let transport = PorticoAPIError(.transport)
    /// The service's endpoint could not be found: the locator could not be fetched, was refused
    /// (its signature failed) or does not list the service.
    public static let locator = PorticoAPIError(.locator)
    /// The request could not be signed (a covered value that is not ASCII, say).
    public static let signing = PorticoAPIError(.signing)
    /// The secret source or the app's ``RequestCredentials`` failed.
    public static let credentials = PorticoAPIError(.credentials)
    /// The body could not be encoded as JSON.
    public static let encoding = PorticoAPIError(.encoding)
    /// A 2xx answer whose body is not the expected type (for an event stream: an
    /// ``EventStreamError`` underneath).
    public static let decoding = PorticoAPIError(.decoding)
    /// The call cannot make a valid URL (a path that is not a path, say).
    public static let invalidRequest = PorticoAPIError(.invalidRequest)
    /// The calling task was cancelled.
    public static let cancelled = PorticoAPIError(.cancelled)
    /// This platform cannot do what was asked: a WebSocket task on Linux, where FoundationNetworking
    /// needs a libcurl built with WebSockets, or where a server trust sends through libcurl.
    public static let unsupported = PorticoAPIError(.unsupported)

    /// The error for a gateway answer that is not 2xx.
    static func answer(_ response: APIResponseData, retryAfter: Duration?) -> PorticoAPIError {
        let problem = response.problem
        let reason: Reason =
            switch response.status {
            case 401: .unauthorized
            case 403: .forbidden
            case 426: .upgradeRequired
            case 429: .rateLimited
            case 503: .unavailable
            default: problem == nil ? .httpStatus : .problem
            }
        let words = problem.map { [$0.title, $0.detail].compactMap { $0 }.joined(separator: ": ") } ?? ""
        return PorticoAPIError(
            reason, status: response.status, problem: problem, retryAfter: retryAfter,
            detail: "the gateway answered \(response.status)\(problem.map { " \($0.type)" } ?? "")\(words.isEmpty ? "" : " (\(words))")")
    }

    static func transport(_ error: any Error) -> PorticoAPIError {
        PorticoAPIError(.transport, underlying: error, detail: "no answer from the gateway: \(error)")
    }

    static func locator(_ error: any Error) -> PorticoAPIError {
        PorticoAPIError(.locator, underlying: error, detail: "the endpoint could not be resolved: \(error)")
    }

    static func signing(_ error: ClientSigningError) -> PorticoAPIError {
        PorticoAPIError(.signing, underlying: error, detail: "\(error)")
    }

    /// The app's error is kept in ``underlying`` but not described: it might quote a token.
    static func credentials(_ error: any Error, what: String) -> PorticoAPIError {
        PorticoAPIError(.credentials, underlying: error, detail: "\(what) failed (\(type(of: error)))")
    }

    static func encoding(_ error: any Error) -> PorticoAPIError {
        PorticoAPIError(.encoding, underlying: error, detail: "the body could not be encoded as JSON: \(error)")
    }

    static func decoding(_ error: any Error, status: Int) -> PorticoAPIError {
        PorticoAPIError(.decoding, status: status, underlying: error, detail: "the \(status) answer could not be decoded: \(error)")
    }

    static func invalidRequest(_ detail: String) -> PorticoAPIError {
        PorticoAPIError(.invalidRequest, detail: detail)
    }

    static func unsupported(_ detail: String) -> PorticoAPIError {
        PorticoAPIError(.unsupported, detail: detail)
    }

    public var description: String { detail.isEmpty ? "\(reason)" : detail }

    /// Same reason, whatever the rest: `error == .rateLimited` matches every 429.
    public static func == (lhs: PorticoAPIError, rhs: PorticoAPIError) -> Bool { lhs.reason == rhs.reason }
}
