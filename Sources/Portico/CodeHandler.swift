import Foundation
import NIOCore

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

    /// `GET target` (path and query, already encoded) from one of ``backends``, its body collected
    /// whole. Fails with ``CodeHandlerError`` when the backend is not allowed or `target` is not an
    /// origin-form path and query (RFC 9112 §3.2.1: a single `/`, then path characters or
    /// percent-escapes, then an optional `?` and query), and with the upstream error, a 429/503
    /// refusal, ``BodyTooLarge`` or ``FetchCancelled`` (the client went away) as a facade source's
    /// fetch would.
    ///
    /// The target is appended to the backend's URL, so anything else could name another host
    /// (`@host/x`, `//host/x`, `http://host/x`): such a target is the handler's programming error,
    /// refused before any request is made, and the client gets a 500 problem.
    public func fetch(backend: String, target: String) -> EventLoopFuture<FetchedResponse> {
        guard backends.contains(backend), let compiled = compiled[backend] else {
            return eventLoop.makeFailedFuture(CodeHandlerError(message: "backend \(backend) is not among this version's backends"))
        }
        guard Self.isOriginForm(target) else {
            return eventLoop.makeFailedFuture(
                CodeHandlerError(message: "target \"\(target)\" is not a path and query starting with a single '/'"))
        }
        return fetcher.get(backend: compiled, target: target, accept: "*/*", limit: maxBodyBytes, on: eventLoop)
    }

    /// Whether `target` is RFC 9112's origin-form: `/`, not `//`, then only RFC 3986 path
    /// characters (unreserved, sub-delims, `:`, `@`, `/`) and well-formed percent-escapes, and
    /// after a `?` the query's (the same, and `?`). No space, control, `#`, `\\` or non-ASCII byte.
    static func isOriginForm(_ target: String) -> Bool {
        let bytes = Array(target.utf8)
        guard bytes.first == UInt8(ascii: "/"), bytes.dropFirst().first != UInt8(ascii: "/") else { return false }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "%"):
                guard index + 2 < bytes.count, isHexDigit(bytes[index + 1]), isHexDigit(bytes[index + 2]) else { return false }
                index += 2
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                break
            default:
                guard pathPunctuation.contains(byte) else { return false }
            }
            index += 1
        }
        return true
    }

    /// unreserved's `-._~`, sub-delims, `:`, `@`, `/` and the query's `?`.
    private static let pathPunctuation = Set("-._~!$&'()*+,;=:@/?".utf8)

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }
}

/// A ``CodeHandlerContext`` call the policy does not allow.
public struct CodeHandlerError: Error, Sendable {
    public let message: String
}
