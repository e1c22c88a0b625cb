import Foundation
import NIOConcurrencyHelpers
import NIOCore
import PorticoUpstream

/// A version's handler written in Swift, for logic a reformer cannot express (a computed field,
/// a choice between backends by the request, a call that depends on another's answer).
///
/// Register it with the gateway under a name (``Gateway/init(snapshot:group:upstream:nonces:rateLimiter:metrics:accessLogWriter:contentHash:logger:codeHandlers:)``);
/// a version selects it with `code: { name: …, backends: [...] }`. The gateway has already
/// routed, authenticated, versioned and rate-limited the request; the handler answers it.
///
/// It is called on the connection's event loop and must not block it: backends are called
/// through ``CodeHandlerContext/fetch(backend:target:)``, which returns a future of that loop
/// and draws from the backend's rate limit and concurrency cap as a proxied request would.
///
/// ```swift
/// /// Version 3 of stockQuote: the quote and its spread between open and last, in one object.
/// struct QuoteWithSpread: CodeHandler {
///     func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse> {
///         let symbol = request.remainder.split(separator: "/").first.map(String.init) ?? ""
///         return context.fetch(backend: "quotes", target: "/v2/quotes/\(symbol)").map { fetched in
///             guard fetched.status == 200,
///                 let quote = try? JSONSerialization.jsonObject(with: fetched.body) as? [String: Any],
///                 let open = quote["openingPrice"] as? Double, let last = quote["currentPrice"] as? Double
///             else { return .json(status: 502, ["error": "quotes gave no usable answer"]) }
///             return .json(status: 200, ["symbol": symbol, "spread": last - open])
///         }
///     }
/// }
///
/// let gateway = Gateway(snapshot: snapshot, codeHandlers: ["quoteWithSpread": QuoteWithSpread()])
/// ```
public protocol CodeHandler: Sendable {
    func respond(to request: CodeHandlerRequest, context: CodeHandlerContext) -> EventLoopFuture<CodeHandlerResponse>
}

/// What a ``CodeHandler`` is told about the request.
public struct CodeHandlerRequest: Sendable {
    public let method: String
    /// The normalised path after the service's prefix (empty, or starting with `/`).
    public let remainder: String
    public let query: String?
    public let service: String
    public let version: Int
    public let requestID: String
    public let body: Data
}

/// What a ``CodeHandler`` answers: a status and a body with its media type.
public struct CodeHandlerResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var body: Data

    public init(status: Int, contentType: String = "application/json", body: Data) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }

    /// A JSON object as the body (keys sorted, so answers are stable).
    public static func json(status: Int, _ object: [String: any Sendable]) -> CodeHandlerResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return CodeHandlerResponse(status: status, body: data)
    }
}

/// The gateway's services a ``CodeHandler`` may use for one request.
public struct CodeHandlerContext: Sendable {
    /// The connection's loop: every future a handler returns completes here.
    public let eventLoop: any EventLoop
    /// The backends the version's policy lets this handler call.
    public let backends: [String]
    let fetcher: SourceFetch
    let compiled: [String: CompiledBackend]
    /// Largest body a fetch collects.
    let maxBodyBytes: Int
    /// Which backend each failed fetch was for, so the gateway can name it when the handler
    /// passes the failure on.
    let failedFetches = FailedFetches()

    /// `GET target` (path and query, already encoded) from one of ``backends``, its body collected
    /// whole. Fails with ``CodeHandlerError`` when the backend is not allowed or `target` is not an
    /// origin-form path and query (RFC 9112 §3.2.1: a single `/`, then path characters or
    /// percent-escapes, then an optional `?` and query; no `.` or `..` path segment in any
    /// encoding), and with the upstream error, a 429/503 refusal, ``BodyTooLarge`` or
    /// ``FetchCancelled`` (the client went away) as a facade source's fetch would.
    ///
    /// The target is appended to the backend's URL, so anything else could name another host
    /// (`@host/x`, `//host/x`, `http://host/x`) or climb out of the URL's base path (`/../x`):
    /// such a target is the handler's programming error, refused before any request is made, and
    /// the client gets a 500 problem. A handler that passes on the upstream error, the refusal or
    /// ``BodyTooLarge`` has the client answered as a proxied request or a facade would be: 502 or
    /// 504 naming the backend (a body over the limit is no valid answer: 502), or the limit's 429
    /// or 503 with its `Retry-After`.
    public func fetch(backend: String, target: String) -> EventLoopFuture<FetchedResponse> {
        guard backends.contains(backend), let compiled = compiled[backend] else {
            return eventLoop.makeFailedFuture(CodeHandlerError(message: "backend \(backend) is not among this version's backends"))
        }
        guard Self.isOriginForm(target) else {
            return eventLoop.makeFailedFuture(
                CodeHandlerError(
                    message: "target \"\(target)\" is not a path and query starting with a single '/', without '.' or '..' segments"))
        }
        let failedFetches = failedFetches
        return fetcher.get(backend: compiled, target: target, accept: "*/*", limit: maxBodyBytes, on: eventLoop)
            .flatMapErrorThrowing { error in
                if let upstreamError = error as? UpstreamError { failedFetches.record(upstreamError, backend: backend) }
                if error is BodyTooLarge { failedFetches.recordOversized(backend: backend) }
                throw error
            }
    }

    /// Whether `target` is RFC 9112's origin-form: `/`, not `//`, then only RFC 3986 path
    /// characters (unreserved, sub-delims, `:`, `@`, `/`) and well-formed percent-escapes, and
    /// after a `?` the query's (the same, and `?`). No space, control, `#`, `\\` or non-ASCII byte.
    ///
    /// The path must also hold no `.` or `..` segment in any encoding (`/../x`, `/%2e%2E/x`,
    /// `/.%2e/x`), and no `%00`: the target is sent as it is, so a backend that resolves dot
    /// segments would climb out of its URL's base path. ``PathNormalizer`` decides, as it does for
    /// a client's path; a segment is also split at `%2F`, `%5C` and `;` for this, since a backend
    /// may decode the first two before resolving (`/x/..%2F..%2Fadmin`) and end a segment at a
    /// path parameter (`/x/..;/admin`). The query is data and is not checked.
    static func isOriginForm(_ target: String) -> Bool {
        let bytes = Array(target.utf8)
        guard bytes.first == UInt8(ascii: "/"), bytes.dropFirst().first != UInt8(ascii: "/") else { return false }
        var index = 0
        var queryStart = bytes.count
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "%"):
                guard index + 2 < bytes.count, PathNormalizer.hexValue(bytes[index + 1]) != nil,
                    PathNormalizer.hexValue(bytes[index + 2]) != nil
                else { return false }
                index += 2
            case UInt8(ascii: "?"):
                queryStart = min(queryStart, index)
            default:
                guard PathNormalizer.isUnreserved(byte) || pathPunctuation.contains(byte) else { return false }
            }
            index += 1
        }
        return staysUnderBasePath(String(decoding: bytes[..<queryStart], as: UTF8.self))
    }

    /// Whether `path` (well-formed, ASCII) has no dot segment, counting `%2F`, `%5C` and `;` as
    /// separators too, and no `%00`.
    private static func staysUnderBasePath(_ path: String) -> Bool {
        guard case .success = PathNormalizer.normalize(path[...]) else { return false }
        var split = path
        for separator in ["%2F", "%2f", "%5C", "%5c", ";"] { split = split.replacingOccurrences(of: separator, with: "/") }
        guard split != path else { return true }
        if case .success = PathNormalizer.normalize(split[...]) { return true }
        return false
    }

    /// Beside the unreserved characters: sub-delims, `:`, `@` and `/`.
    private static let pathPunctuation = Set("!$&'()*+,;=:@/".utf8)
}

/// A ``CodeHandlerContext`` call the policy does not allow.
public struct CodeHandlerError: Error, Sendable {
    public let message: String
}
