import NIOCore
import NIOHTTP1
import PorticoHTTP

/// Sends requests to backends and streams their answers back onto an event loop.
///
/// The gateway talks to backends only through this protocol, so that the handlers do not know which
/// client carries a request: ``NIOUpstreamClient`` (`http://` backends, by default) on the event
/// loop, ``CurlUpstreamClient`` (`https://` ones) through libcurl, chosen per backend by
/// ``RoutingUpstreamClient``. A new kind of backend client is a new implementation of it.
public protocol UpstreamClient: Sendable {
    /// Starts `request`; every call on `handler` happens on `eventLoop`. Across the calls the handler
    /// sees at most one head, then body parts, then exactly one result — unless the returned task was
    /// cancelled, after which it may receive nothing more.
    func execute(
        _ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler
    ) -> any UpstreamTask

    /// Stops accepting work, fails what is in flight and releases threads and connections.
    func shutdown()
}

/// A request in flight, as seen from the side that started it.
public protocol UpstreamTask: Sendable {
    /// Abandons the exchange (for instance when the client went away); the connection is dropped.
    func cancel()
    /// Reports that `bytes` of body delivered earlier have left the gateway. The client stops
    /// reading from the backend while too many delivered bytes are unconsumed: this is how a slow
    /// client slows the backend down instead of making the gateway buffer its download.
    func consumed(bytes: Int)
}

/// Receives one exchange's response on the event loop that started it. Not `Sendable`: it lives on
/// that event loop (a channel handler, typically).
public protocol UpstreamResponseHandler: AnyObject {
    /// Called with what arrived since the last call, in one event-loop hop; a handler writing to a
    /// channel flushes once per call.
    func upstreamReceived(_ events: UpstreamEvents)
}

/// What arrived from the backend since the last delivery, in order: head, body, end.
public struct UpstreamEvents: Sendable {
    public var head: UpstreamResponseHead?
    /// Body bytes; the receiver returns them with ``UpstreamTask/consumed(bytes:)`` once written,
    /// unless `result` is set too (the exchange is over and needs no more credit).
    public var body: ByteBuffer?
    public var result: Result<UpstreamMetrics, UpstreamError>?
    /// The response's trailer fields, with a successful result (HTTP/2 backends: gRPC's
    /// `grpc-status` is one).
    public var trailers: HTTPHeaders?

    public init(
        head: UpstreamResponseHead? = nil, body: ByteBuffer? = nil, result: Result<UpstreamMetrics, UpstreamError>? = nil,
        trailers: HTTPHeaders? = nil
    ) {
        self.head = head
        self.body = body
        self.result = result
        self.trailers = trailers
    }
}

/// What to send to a backend. The caller has already decided every header: the client adds none of
/// its own beyond framing (`Content-Length`).
public struct UpstreamRequest: Sendable {
    public var method: String
    /// Absolute URL, already percent-encoded.
    public var url: String
    /// As the lines they are sent as (``FieldLines``): the NIO client writes them as they are.
    public var headers: FieldLines
    public var body: ByteBuffer?
    public var connectTimeout: Duration
    /// Whole-exchange limit, including time queued for a connection.
    public var timeout: Duration
    /// For an answer that turns out to be an event stream (``UpstreamResponseHead/isEventStream``):
    /// the longest wait for its next bytes once its head has come, instead of ``timeout`` (a
    /// service's `limits.streamIdleTimeout`); `nil` uses ``timeout`` for that wait too. The libcurl
    /// client, which cannot change a transfer's limits once it runs, applies it from the start to a
    /// request whose `Accept` is `text/event-stream`.
    public var eventIdleTimeout: Duration?
    /// For `https` URLs: the CA certificates (PEM) the server's certificate must chain to; `nil`
    /// uses the system's trust store.
    public var trustedCAFile: String?
    /// Which client sends it through a ``RoutingUpstreamClient``; `nil` goes by the URL's scheme
    /// (`https` → curl, otherwise NIO). Other clients ignore it.
    public var client: UpstreamClientKind?

    /// Every property may be given here: a request made whole at once is not copied to be
    /// changed afterwards (a retain and a release of each of its fields).
    public init(
        method: String, url: String, headers: FieldLines = FieldLines(), body: ByteBuffer? = nil,
        connectTimeout: Duration = .seconds(2), timeout: Duration = .seconds(30), eventIdleTimeout: Duration? = nil,
        trustedCAFile: String? = nil, client: UpstreamClientKind? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.eventIdleTimeout = eventIdleTimeout
        self.trustedCAFile = trustedCAFile
        self.client = client
    }

    /// With the fields as pairs, in order (repeated names allowed).
    public init(
        method: String, url: String, headers: [(name: String, value: String)], body: ByteBuffer? = nil,
        connectTimeout: Duration = .seconds(2), timeout: Duration = .seconds(30)
    ) {
        self.init(
            method: method, url: url, headers: FieldLines(headers), body: body, connectTimeout: connectTimeout,
            timeout: timeout)
    }
}

public struct UpstreamResponseHead: Sendable {
    public var status: Int
    /// As the backend sent them, hop-by-hop and framing fields included (the caller filters), kept
    /// as HTTP/1.1 field lines (``FieldLines``): what reaches an HTTP/1.1 client is copied from
    /// them as bytes (the gateway's `ResponseDecoration`), without a string made of each name and
    /// value on the way in and read again on the way out. Frame what is passed on with
    /// ``contentLength``, never with these fields' `Content-Length`.
    ///
    /// A field HTTP/1.1 cannot carry as it is (a control byte that libcurl or an HTTP/2 backend
    /// passed on, or a code handler made) is left out and makes the head unsendable
    /// (``areSendable``).
    public var fields: FieldLines
    /// The fields as NIO's type, for the paths that read or change them as pairs (the cache,
    /// compression, an upgrade's answer, a facade source): made from the lines on each read, and
    /// written back as lines when changed. Not for the proxy's path, which reads ``fields``. A
    /// field left out of the lines stays left out: the head stays unsendable through a change.
    public var headers: HTTPHeaders {
        get { fields.httpHeaders }
        set { fields = FieldLines(newValue, leavingOut: fields) }
    }
    /// The backend's `Content-Length`, checked: one decimal value, no `Transfer-Encoding` beside it
    /// (a head that fails these checks ends the exchange instead). When a body follows, the body
    /// delivered is exactly this long, or the exchange fails before its last byte is delivered, so a
    /// receiver that forwards this length never announces bytes that do not come. For a response to
    /// HEAD and for a 304 it describes the representation, and no body follows. nil when the body is
    /// delimited otherwise (chunked, or by the backend closing) or there is none.
    public var contentLength: Int?

    /// Whether the answer is a server-sent event stream (`Content-Type: text/event-stream`): a
    /// body that stays open, event after event, for as long as the backend has events to send.
    public var isEventStream: Bool {
        guard let type = fields.first(name: "content-type") else { return false }
        // Compared in place, case aside: asked of every response head (a lowercased copy of a
        // type such as `application/json` took an allocation each time).
        let mediaType = Substring(type.utf8.prefix { $0 != UInt8(ascii: ";") }).trimmingOptionalWhitespace()
        return HeaderName.matches(mediaType, "text/event-stream")
    }

    /// Whether every field can be written to a client as it is: each was checked as it was added
    /// (``FieldLines``), and none was left out.
    public var areSendable: Bool { fields.isSendable }

    public init(status: Int, fields: FieldLines, contentLength: Int? = nil) {
        self.status = status
        self.fields = fields
        self.contentLength = contentLength
    }

    public init(status: Int, headers: HTTPHeaders, contentLength: Int? = nil) {
        self.init(status: status, fields: FieldLines(headers), contentLength: contentLength)
    }
}

/// Facts about a finished exchange, for the access log and metrics.
public struct UpstreamMetrics: Sendable {
    /// From hand-off to the client until the exchange ended, as the client measured it.
    public var duration: Duration
    /// Connections opened for this exchange (0 when a pooled connection was reused).
    public var newConnections: Int

    public init(duration: Duration, newConnections: Int) {
        self.duration = duration
        self.newConnections = newConnections
    }
}

/// Why an exchange failed. The gateway maps the kind to a status (502, 504); `detail` is for logs
/// only, since it may name internal addresses.
public struct UpstreamError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The connection could not be made (refused, unreachable, name not resolved).
        case connectFailed
        /// The connect timeout or the whole-exchange timeout elapsed.
        case timedOut
        /// The backend broke the exchange: closed early, sent something that is not HTTP, reset.
        case badResponse
        /// The client is shutting down.
        case shutdown
        /// The request could not be started (a malformed URL, say).
        case invalidRequest
    }

    public var kind: Kind
    public var detail: String

    public init(_ kind: Kind, detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { "\(kind): \(detail)" }
}
