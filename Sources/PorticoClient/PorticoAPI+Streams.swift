import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if os(Linux)
import CPorticoClientCurl
#endif

/// Streams that stay open: a service's server-sent events as an `AsyncSequence`, and the signed
/// opening request of a WebSocket (docs/streaming.md).
extension PorticoAPI {
    /// How ``PorticoAPI/events(_:version:path:query:lastEventID:headers:options:)`` reads a stream.
    public struct EventStreamOptions: Sendable {
        /// Reconnect when the stream ends or its connection is lost, as an `EventSource` does:
        /// signed anew, with `Last-Event-ID`, after the stream's `retry:` time (or
        /// ``reconnectionDelay``). The first connection is not retried: its failure is thrown at
        /// once, so that an app learns right away that the gateway cannot be reached.
        public var reconnects = true
        /// Reconnections in a row without an event before giving up: then the last connection's
        /// failure is thrown, or the sequence ends if it ended cleanly.
        public var maximumReconnections = 5
        /// The wait before reconnecting until the stream sets its own with `retry:`.
        public var reconnectionDelay: Duration = .seconds(3)
        /// The longest silence (a heartbeat comment breaks one) before the connection counts as lost.
        public var idleTimeout: TimeInterval = 60
        /// The longest line or event accepted: a stream is untrusted input.
        public var maximumEventBytes = 1 << 20

        public init() {}
    }

    /// The events of `service`'s `text/event-stream` answer at `path`, as they arrive.
    ///
    /// Nothing is sent until the sequence is iterated. Each connection is a signed `GET` with
    /// `Accept: text/event-stream`; `lastEventID` (and, on a reconnection, the last `id:` read) is
    /// sent as `Last-Event-ID` and covered by the signature. A non-2xx answer throws its
    /// ``PorticoAPIError`` (a 401, 403, 429… with the gateway's problem); a 204 ends the sequence,
    /// which is how a server says not to reconnect. Every error thrown is a ``PorticoAPIError``.
    ///
    /// ```swift
    /// for try await event in api.events("ticks") {
    ///     let tick = try event.decode(Tick.self)
    /// }
    /// ```
    ///
    /// Leaving the loop, or cancelling its task, closes the connection.
    public func events(
        _ service: String, version: String? = nil, path: String = "", query: [URLQueryItem] = [], lastEventID: String? = nil,
        headers: [String: String] = [:], options: EventStreamOptions = EventStreamOptions()
    ) -> ServerSentEvents {
        ServerSentEvents(
            api: self, request: APIRequest(method: "GET", service: service, version: version, path: path, query: query, headers: headers),
            lastEventID: lastEventID ?? "", options: options)
    }

    /// The opening request of a WebSocket to `service` at `path`, signed like any call, for the
    /// WebSocket client of the app's choice: a `ws://` or `wss://` URL, the identity fields, the
    /// credentials' fields, `Sec-WebSocket-Protocol` when `protocols` are given, and the signature
    /// over the method, authority, path and query and those fields. It is an HTTP/1.1 upgrade's
    /// (`GET`): a client that opens its WebSocket over HTTP/2 sends `CONNECT` (RFC 8441), which
    /// this signature does not cover.
    ///
    /// The signature cannot cover `Sec-WebSocket-Key`, which the WebSocket client draws when it
    /// sends; its nonce makes the request good for one handshake, so a new connection needs a
    /// new request.
    public func webSocketRequest(
        _ service: String, version: String? = nil, path: String = "", query: [URLQueryItem] = [], protocols: [String] = [],
        headers: [String: String] = [:]
    ) async throws(PorticoAPIError) -> URLRequest {
        let request = APIRequest(method: "GET", service: service, version: version, path: path, query: query, headers: headers)
        let url = try request.url(base: try await endpoint(of: request))
        let credentials = try await credentialFields(for: request)
        let offered = protocols.isEmpty ? [:] : ["Sec-WebSocket-Protocol": protocols.joined(separator: ", ")]
        var signed = try await signedRequest(request, url: url, credentials: credentials, accept: nil, extra: offered)
        // Signed as http(s) (what the gateway sees); the scheme is not covered, so the same
        // request opens as ws(s).
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            throw .invalidRequest("the endpoint \(url.absoluteString) is not a URL")
        }
        components.scheme = components.scheme?.lowercased() == "https" ? "wss" : "ws"
        signed.url = components.url
        return signed
    }

    /// A WebSocket task for `service` at `path`, opened with ``webSocketRequest(_:version:path:query:protocols:headers:)``
    /// in the façade's session; call `resume()` to connect.
    ///
    /// - Throws: ``PorticoAPIError/unsupported`` where URLSession cannot open it: on Linux when
    ///   the libcurl under FoundationNetworking was built without WebSockets (Debian 12's is), or
    ///   when a server trust other than ``ServerTrust/system`` sends through libcurl there. Then
    ///   ``webSocketRequest(_:version:path:query:protocols:headers:)`` serves another client.
    public func webSocketTask(
        _ service: String, version: String? = nil, path: String = "", query: [URLQueryItem] = [], protocols: [String] = [],
        headers: [String: String] = [:]
    ) async throws(PorticoAPIError) -> URLSessionWebSocketTask {
        guard let session = sender.webSocketSession else {
            throw .unsupported(
                "on Linux a server trust other than .system sends through libcurl, which opens no WebSocket task; "
                    + "use webSocketRequest with a WebSocket client")
        }
        guard Self.urlSessionOpensWebSockets else {
            throw .unsupported(
                "URLSessionWebSocketTask needs a libcurl built with WebSockets (ws among its protocols), and this one is not; "
                    + "use webSocketRequest with a WebSocket client")
        }
        return session.webSocketTask(
            with: try await webSocketRequest(
                service, version: version, path: path, query: query, protocols: protocols, headers: headers))
    }

    /// Whether URLSession can open a WebSocket here: always on Apple platforms; on Linux when the
    /// libcurl FoundationNetworking loaded lists the `ws` protocol.
    public static var urlSessionOpensWebSockets: Bool {
        #if os(Linux)
        return portico_client_curl_supports_websockets() != 0
        #else
        return true
        #endif
    }

    /// Opens one connection of an event stream: its body, once a 2xx `text/event-stream` head has
    /// arrived, or `nil` for a 204. A refusal for clock skew corrects the clock and is asked once more.
    func openEventStream(
        _ request: APIRequest, lastEventID: String, options: EventStreamOptions
    ) async throws(PorticoAPIError) -> AsyncThrowingStream<Data, any Error>? {
        let url = try request.url(base: try await endpoint(of: request))
        let credentials = try await credentialFields(for: request)
        var request = request
        request.headers["Cache-Control"] = "no-cache"
        var resynced = false
        while true {
            if Task.isCancelled { throw .cancelled }
            var urlRequest = try await signedRequest(
                request, url: url, credentials: credentials, accept: "text/event-stream",
                extra: lastEventID.isEmpty ? [:] : ["Last-Event-ID": lastEventID])
            urlRequest.timeoutInterval = options.idleTimeout
            let answer: StreamedAnswer
            do {
                answer = try await sender.stream(urlRequest)
            } catch {
                throw Self.sendingFailed(error)
            }
            if (200..<300).contains(answer.status) {
                if answer.status == 204 { return nil }
                // The HTML standard reads a stream from a 200 of this media type only.
                let type = answer.headers["content-type"]
                let mediaType = type?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
                guard answer.status == 200, mediaType == "text/event-stream" else {
                    throw .decoding(EventStreamError.notEventStream(contentType: type), status: answer.status)
                }
                return answer.body
            }
            let refusal = APIResponseData(status: answer.status, headers: answer.headers, body: await Self.collect(answer.body))
            if !resynced, learnsClockOffset(from: refusal) {
                resynced = true
                continue
            }
            throw .answer(refusal, retryAfter: refusal.retryAfter(now: clock()))
        }
    }

    /// A refusal's body, for its problem: at most `limit` bytes, then the transfer is let go.
    private static func collect(_ body: AsyncThrowingStream<Data, any Error>, limit: Int = 64 << 10) async -> Data {
        var data = Data()
        do {
            for try await chunk in body {
                data.append(chunk)
                if data.count >= limit { break }
            }
        } catch {
            // What arrived is what there is to read.
        }
        return data
    }
}

/// A service's server-sent events, as ``PorticoAPI/events(_:version:path:query:lastEventID:headers:options:)``
/// makes them: each iteration opens its own connection.
public struct ServerSentEvents: AsyncSequence, Sendable {
    public typealias Element = ServerSentEvent

    let api: PorticoAPI
    let request: APIRequest
    let lastEventID: String
    let options: PorticoAPI.EventStreamOptions

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(reader: EventStreamReader(api: api, request: request, lastEventID: lastEventID, options: options))
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let reader: EventStreamReader

        /// The next event; `nil` once the stream has ended for good. Throws a ``PorticoAPIError``.
        public mutating func next() async throws -> ServerSentEvent? {
            try await reader.next()
        }
    }
}

/// One iteration's state: the connection's body, the parser (whose last event ID and `retry:`
/// outlive a connection), and the reconnections made since the last event.
final class EventStreamReader {
    private let api: PorticoAPI
    private let request: APIRequest
    private let options: PorticoAPI.EventStreamOptions
    private var parser: EventStreamParser
    private var body: AsyncThrowingStream<Data, any Error>.AsyncIterator?
    private var pending: [ServerSentEvent] = []
    private var pendingIndex = 0
    private var connected = false
    private var ended = false
    /// Reconnections since the last event, and why the last connection ended (`nil`: cleanly).
    private var reconnections = 0
    private var lastFailure: (any Error)?

    init(api: PorticoAPI, request: APIRequest, lastEventID: String, options: PorticoAPI.EventStreamOptions) {
        self.api = api
        self.request = request
        self.options = options
        self.parser = EventStreamParser(lastEventID: lastEventID, maximumEventBytes: options.maximumEventBytes)
    }

    func next() async throws(PorticoAPIError) -> ServerSentEvent? {
        while true {
            if pendingIndex < pending.count {
                defer { pendingIndex += 1 }
                return pending[pendingIndex]
            }
            if ended { return nil }
            if Task.isCancelled {
                finish()
                throw .cancelled
            }
            guard body != nil else {
                try await connect()
                continue
            }
            do {
                guard let chunk = try await body!.next() else {
                    lost(nil)
                    continue
                }
                pending = try parser.feed(chunk)
                pendingIndex = 0
                if !pending.isEmpty { reconnections = 0 }
            } catch let error as EventStreamError {
                finish()
                throw .decoding(error, status: 200)
            } catch {
                lost(error)
            }
        }
    }

    /// The connection ended, cleanly (`nil`) or not.
    private func lost(_ error: (any Error)?) {
        body = nil
        lastFailure = error
        parser.restart()
    }

    private func finish() {
        body = nil
        ended = true
    }

    /// Opens the first connection, or a reconnection after its delay; ends the sequence when no
    /// more reconnections are allowed.
    private func connect() async throws(PorticoAPIError) {
        if connected {
            guard options.reconnects, reconnections < options.maximumReconnections else {
                finish()
                if let lastFailure {
                    if (lastFailure as? URLError)?.code == .cancelled { throw .cancelled }
                    throw .transport(lastFailure)
                }
                return
            }
            reconnections += 1
            do {
                try await api.sleep(parser.retry ?? options.reconnectionDelay)
            } catch {
                finish()
                throw .cancelled
            }
        }
        do {
            guard let stream = try await api.openEventStream(request, lastEventID: parser.lastEventID, options: options) else {
                return finish()
            }
            body = stream.makeAsyncIterator()
            connected = true
        } catch let error where error == .transport && connected {
            // A reconnection that found no one: counted, and tried again after the delay.
            lastFailure = error.underlying
        } catch {
            finish()
            throw error
        }
    }
}
