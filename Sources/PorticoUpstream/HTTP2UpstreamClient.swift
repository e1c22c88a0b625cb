import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import PorticoTLS
import Synchronization

/// The ``UpstreamClient`` for backends that speak HTTP/2: `h2c` (`http://`, prior knowledge) and
/// `h2` (`https://`, TLS with ALPN `h2`, through PorticoTLS's OpenSSL client handler), on the event
/// loop of the client connection that asked.
///
/// Each event loop keeps one multiplexed connection per backend origin and sends each request as a
/// stream of it, as many at once as the backend's SETTINGS_MAX_CONCURRENT_STREAMS allows (the rest
/// wait, in order, and the wait counts toward their timeout). A connection the backend sends GOAWAY
/// on takes no new streams; a stream it refused unprocessed (RST_STREAM REFUSED_STREAM, or above
/// the GOAWAY's last stream id, RFC 9113 §8.7) is sent again on a new connection, whatever its
/// method, since the backend says it never acted on it. Response trailers (gRPC's `grpc-status`)
/// are delivered with the result. Body bytes are read from the stream only while the gateway's
/// unconsumed bytes stay under the high watermark, so a slow client slows the backend's stream,
/// through HTTP/2 flow control, not the whole connection.
///
/// A loop's connections are found as the HTTP/1.1 client finds its pools: a table per loop of the
/// group, made up front and never written after `init`, so no lock is taken on the way to a
/// backend; a loop from outside the group is served from a second table behind a lock.
public final class HTTP2UpstreamClient: UpstreamClient {
    public struct Configuration: Sendable {
        /// Body bytes delivered but not yet consumed at which a stream stops reading.
        public var highWatermark: Int
        /// Unconsumed bytes at or under which a paused stream reads again.
        public var lowWatermark: Int
        /// Times a request the backend refused unprocessed is sent again.
        public var maxRefusedRetries: Int
        /// How long a connection with no stream open is kept (the policy's
        /// `upstream.idleConnectionTimeout`, as for the HTTP/1.1 client's pools).
        public var idleTimeout: Duration

        public init(
            highWatermark: Int = 256 * 1024, lowWatermark: Int = 64 * 1024, maxRefusedRetries: Int = 3, idleTimeout: Duration = .seconds(60)
        ) {
            self.highWatermark = highWatermark
            self.lowWatermark = min(lowWatermark, highWatermark - 1)
            self.maxRefusedRetries = maxRefusedRetries
            self.idleTimeout = idleTimeout
        }
    }

    let configuration: Configuration
    /// One entry per loop of the group, written only in `init`.
    private let loops: [ObjectIdentifier: HTTP2LoopConnections]
    /// Loops outside the group, added on first use.
    private let otherLoops = NIOLockedValueBox<[ObjectIdentifier: HTTP2LoopConnections]>([:])
    private let tlsContexts = NIOLockedValueBox<[String: TLSClientContext]>([:])
    private let isShutDown = Atomic<Bool>(false)

    /// - Parameter group: the event loops that will call ``execute(_:eventLoop:handler:)`` (the
    ///   gateway's group).
    public init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, configuration: Configuration = .init()) {
        self.configuration = configuration
        var loops: [ObjectIdentifier: HTTP2LoopConnections] = [:]
        for loop in group.makeIterator() { loops[ObjectIdentifier(loop)] = HTTP2LoopConnections(eventLoop: loop) }
        self.loops = loops
    }

    /// The table of `eventLoop`'s connections.
    private func connections(of eventLoop: any EventLoop) -> HTTP2LoopConnections {
        let key = ObjectIdentifier(eventLoop)
        if let connections = loops[key] { return connections }
        return otherLoops.withLockedValue { others in
            if let existing = others[key] { return existing }
            let made = HTTP2LoopConnections(eventLoop: eventLoop)
            others[key] = made
            return made
        }
    }

    public func execute(
        _ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler
    ) -> any UpstreamTask {
        let exchange = HTTP2UpstreamExchange(request: request, eventLoop: eventLoop, handler: handler, configuration: configuration)
        if eventLoop.inEventLoop {
            dispatch(exchange)
        } else {
            eventLoop.execute { self.dispatch(exchange) }
        }
        return exchange
    }

    /// Sends `exchange` on its loop's connection to its origin, opening one if there is none
    /// that takes new streams. Runs on the exchange's loop.
    func dispatch(_ exchange: HTTP2UpstreamExchange) {
        guard !isShutDown.load(ordering: .relaxed) else {
            return exchange.fail(UpstreamError(.shutdown, detail: "the upstream client is shut down"))
        }
        // A field HTTP/1.1 cannot carry (``FieldLines/isSendable``) is refused here as well.
        guard exchange.request.headers.isSendable else { return exchange.fail(.unsendableRequest) }
        var target: HTTP2Target
        switch HTTP2Target.parse(exchange.request.url) {
        case .success(let parsed): target = parsed
        case .failure(let error): return exchange.fail(error)
        }
        if target.tls { target.caFile = exchange.request.trustedCAFile }
        exchange.start(target: target)
        let connection = connections(of: exchange.eventLoop).connection(to: target) { [self] in
            HTTP2UpstreamConnection(target: target, eventLoop: exchange.eventLoop, client: self)
        }
        connection.enqueue(exchange)
    }

    /// Called by a connection that has ended, so the next request opens a new one.
    func connectionEnded(_ connection: HTTP2UpstreamConnection) {
        connections(of: connection.eventLoop).remove(connection)
    }

    func tlsContext(caFile: String?) throws -> TLSClientContext {
        try tlsContexts.withLockedValue { contexts in
            if let context = contexts[caFile ?? ""] { return context }
            let context = try TLSClientContext(caFile: caFile, applicationProtocols: ["h2"])
            contexts[caFile ?? ""] = context
            return context
        }
    }

    public func shutdown() {
        isShutDown.store(true, ordering: .relaxed)
        let all = Array(loops.values) + otherLoops.withLockedValue { Array($0.values) }
        for connections in all {
            connections.eventLoop.execute { connections.closeAll() }
        }
    }
}

/// Where an HTTP/2 request goes: its origin (with the scheme: `h2` or `h2c`) and its `:path`.
struct HTTP2Target: Hashable {
    var tls: Bool
    var host: String
    var port: Int
    /// `host[:port]` as the URL spells it.
    var authority: String
    var caFile: String?
    var requestTarget: String

    /// The connection key: everything but the path.
    var origin: HTTP2Target {
        var origin = self
        origin.requestTarget = ""
        return origin
    }

    static func parse(_ url: String) -> Result<HTTP2Target, UpstreamError> {
        let lowered = url.prefix(8).lowercased()
        let tls = lowered.hasPrefix("https://")
        guard tls || lowered.hasPrefix("http://") else {
            return .failure(UpstreamError(.invalidRequest, detail: "not an absolute http:// or https:// URL: \(url)"))
        }
        // The HTTP/1.1 client's parser reads the rest; only the default port differs.
        let rest = url.dropFirst(tls ? 8 : 7)
        switch UpstreamOrigin.parse("http://" + rest) {
        case .failure(let error): return .failure(error)
        case .success(let parsed):
            let authority = String(parsed.authority)
            // A port after the host (after an IPv6 literal's bracket, if there is one).
            let hostEnd = authority.lastIndex(of: "]") ?? authority.startIndex
            let portGiven = authority[hostEnd...].contains(":")
            let port = tls && !portGiven ? 443 : parsed.origin.port
            return .success(
                HTTP2Target(
                    tls: tls, host: parsed.origin.host, port: port, authority: authority, caFile: nil, requestTarget: parsed.requestTarget))
        }
    }
}

/// One event loop's connections, by origin. Confined to its loop.
final class HTTP2LoopConnections: @unchecked Sendable {
    // Unchecked: every method runs on `eventLoop` (the client finds the object under its lock and
    // hands it to the loop).
    let eventLoop: any EventLoop
    private var connections: [HTTP2Target: HTTP2UpstreamConnection] = [:]

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func connection(to target: HTTP2Target, make: () -> HTTP2UpstreamConnection) -> HTTP2UpstreamConnection {
        let origin = target.origin
        if let existing = connections[origin], existing.takesNewStreams { return existing }
        let made = make()
        connections[origin] = made
        return made
    }

    func remove(_ connection: HTTP2UpstreamConnection) {
        let origin = connection.target.origin
        if connections[origin] === connection { connections[origin] = nil }
    }

    func closeAll() {
        for connection in connections.values { connection.close() }
        connections = [:]
    }
}
