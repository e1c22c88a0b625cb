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
    /// whole. Fails with ``CodeHandlerError`` when the backend is not allowed, and with the
    /// upstream error, a 429/503 refusal or ``BodyTooLarge`` as a facade source's fetch would.
    public func fetch(backend: String, target: String) -> EventLoopFuture<FetchedResponse> {
        guard backends.contains(backend), let compiled = compiled[backend] else {
            return eventLoop.makeFailedFuture(CodeHandlerError(message: "backend \(backend) is not among this version's backends"))
        }
        return fetcher.get(backend: compiled, target: target, accept: "*/*", limit: maxBodyBytes, on: eventLoop)
    }
}

/// A ``CodeHandlerContext`` call the policy does not allow.
public struct CodeHandlerError: Error, Sendable {
    public let message: String
}
