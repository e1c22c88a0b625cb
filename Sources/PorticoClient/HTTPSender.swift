import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP answer as the façade reads it: field names lowercased.
struct HTTPAnswer: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data
}

/// An answer whose body is read as it arrives (an event stream's).
struct StreamedAnswer: Sendable {
    var status: Int
    /// Field names lowercased.
    var headers: [String: String]
    /// The body's chunks as they arrive; it ends with the answer, or throws the transfer's
    /// failure. Ending its iteration, or dropping it, cancels the transfer.
    var body: AsyncThrowingStream<Data, any Error>
}

/// How the façade sends a request: through a `URLSession`, or (on Linux, for a ``ServerTrust``
/// URLSession cannot honour there) through libcurl. Throws a `URLError` when no answer arrived.
protocol HTTPSender: Sendable {
    func send(_ request: URLRequest) async throws -> HTTPAnswer
    /// Sends `request` and returns once the answer's head has arrived; the body follows. The
    /// request's `timeoutInterval` bounds the wait for each next byte, not the whole answer.
    func stream(_ request: URLRequest) async throws -> StreamedAnswer
    /// The session a WebSocket task can be made in; `nil` where URLSession does not send (libcurl
    /// for a server trust on Linux).
    var webSocketSession: URLSession? { get }
}

struct URLSessionSender: HTTPSender {
    let session: URLSession
    /// A session of the same configuration whose delegate hands on each body chunk: on Linux
    /// FoundationNetworking has no `bytes(for:)` and calls no per-task delegate.
    let streaming: StreamingSession

    init(session: URLSession, trust: ServerTrust = .system) {
        self.session = session
        self.streaming = StreamingSession(configuration: session.configuration, trust: trust)
    }

    func stream(_ request: URLRequest) async throws -> StreamedAnswer {
        try await streaming.start(request)
    }

    var webSocketSession: URLSession? { session }

    func send(_ request: URLRequest) async throws -> HTTPAnswer {
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return HTTPAnswer(status: http.statusCode, headers: headers, body: data)
    }
}

/// The locator's fetches through the façade's sender, so they meet the same trust as its calls.
struct SenderLocatorTransport: ServiceLocatorTransport {
    let sender: any HTTPSender
    var timeout: TimeInterval = 10

    func get(_ url: URL, headers: [String: String]) async throws -> ServiceLocatorResponse {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let answer = try await sender.send(request)
        return ServiceLocatorResponse(status: answer.status, headers: answer.headers, body: answer.body)
    }
}

extension URLSession {
    /// The session a façade makes when the app gives none: ephemeral, with its own cache off (the
    /// façade caches, and must see the gateway's 304s), and on Apple platforms a delegate that
    /// honours `trust`.
    static func porticoSession(trust: ServerTrust) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        #if canImport(Security)
        if !trust.isSystem {
            return URLSession(configuration: configuration, delegate: ServerTrustDelegate(trust: trust), delegateQueue: nil)
        }
        #endif
        return URLSession(configuration: configuration)
    }
}
