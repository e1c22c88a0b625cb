import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import PorticoTLS

/// One multiplexed HTTP/2 connection to a backend origin, on one event loop: it opens, takes
/// exchanges in order, starts each as a stream while the backend's SETTINGS_MAX_CONCURRENT_STREAMS
/// allows, and stops taking new ones once the backend sends GOAWAY (closing when its last stream
/// ends). Confined to its loop.
final class HTTP2UpstreamConnection: @unchecked Sendable {
    // Unchecked: every method runs on `eventLoop`; the channel initializer that captures it runs there too.
    let target: HTTP2Target
    let eventLoop: any EventLoop
    let client: HTTP2UpstreamClient

    private enum State {
        case connecting
        /// Connected; the backend's first SETTINGS (its stream limit) not yet read.
        case connected(NIOHTTP2Handler.StreamMultiplexer, any Channel)
        case ready(NIOHTTP2Handler.StreamMultiplexer, any Channel)
        case closed
    }

    private var state = State.connecting
    private var waiting = CircularBuffer<HTTP2UpstreamExchange>()
    private var active = 0
    /// The backend's SETTINGS_MAX_CONCURRENT_STREAMS; unlimited until its SETTINGS say (RFC 9113
    /// §6.5.2), bounded here all the same.
    private var maxStreams = 100
    private var goingAway = false
    /// The last stream the backend's GOAWAY says it may have processed.
    private var goAwayLastStream: HTTP2StreamID?
    private var multiplexer: NIOHTTP2Handler.StreamMultiplexer?
    private var connectStarted = false
    /// Runs while no stream is open and none waits; closes the connection when it fires.
    private var idleTimer: Scheduled<Void>?
    /// Runs from the connect until the backend's first SETTINGS.
    private var settingsTimer: Scheduled<Void>?
    /// Why the connection ended, as far as it told (a TLS handshake's failure, NIO's error).
    var lastError: (any Error)?

    init(target: HTTP2Target, eventLoop: any EventLoop, client: HTTP2UpstreamClient) {
        self.target = target
        self.eventLoop = eventLoop
        self.client = client
    }

    var takesNewStreams: Bool {
        if case .closed = state { return false }
        return !goingAway
    }

    func enqueue(_ exchange: HTTP2UpstreamExchange) {
        if !connectStarted {
            connectStarted = true
            exchange.openedConnection = true
            connect(timeout: exchange.request.connectTimeout)
        }
        exchange.waiting(on: self)
        waiting.append(exchange)
        startWaiting()
    }

    /// An exchange that ended (cancelled, timed out) while it waited: its place and its request
    /// body go now, not when a stream would have been free for it.
    func withdraw(_ exchange: HTTP2UpstreamExchange) {
        if let index = waiting.firstIndex(where: { $0 === exchange }) { waiting.remove(at: index) }
        if active == 0 && waiting.isEmpty, case .ready = state, idleTimer == nil { startIdleTimer() }
    }

    // MARK: Connecting

    private func connect(timeout: Duration) {
        let target = self.target
        let tls: TLSClientContext?
        do {
            tls = target.tls ? try client.tlsContext(caFile: target.caFile) : nil
        } catch {
            return eventLoop.execute { self.ended(UpstreamError(.connectFailed, detail: "TLS set-up: \(error)")) }
        }
        guard let bootstrap = ClientBootstrap(validatingGroup: eventLoop) else {
            return eventLoop.execute {
                self.ended(UpstreamError(.invalidRequest, detail: "the HTTP/2 client needs a NIOPosix event loop"))
            }
        }
        let connecting =
            bootstrap
            .connectTimeout(TimeAmount(timeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(TLSClientHandler(context: tls, serverName: target.host)) }
                    var connection = NIOHTTP2Handler.ConnectionConfiguration()
                    // No server push. A stream's window is what a paused stream may still be sent:
                    // the client's high watermark, so that a stalled reader holds no more than that.
                    let window = client.configuration.highWatermark
                    connection.initialSettings = [
                        HTTP2Setting(parameter: .enablePush, value: 0),
                        HTTP2Setting(parameter: .initialWindowSize, value: window),
                    ]
                    connection.targetWindowSize = 4 << 20
                    var stream = NIOHTTP2Handler.StreamConfiguration()
                    stream.targetWindowSize = window
                    let http2 = NIOHTTP2Handler(
                        mode: .client, eventLoop: channel.eventLoop, connectionConfiguration: connection, streamConfiguration: stream
                    ) { pushed in pushed.close() }
                    try pipeline.addHandler(http2)
                    try pipeline.addHandler(HTTP2UpstreamConnectionHandler(connection: self))
                    self.multiplexer = try http2.syncMultiplexer()
                }
            }
        connecting.connect(host: target.host, port: target.port).hop(to: eventLoop).whenComplete { [self] result in
            switch result {
            case .success(let channel):
                // Closed (shut down) while it connected: it goes at once.
                guard case .connecting = state, let multiplexer else { return channel.close(promise: nil) }
                state = .connected(multiplexer, channel)
                // A backend that accepts and never sends its SETTINGS is no HTTP/2 server: the
                // exchanges waiting fail as a connect failure would, and the connection goes.
                settingsTimer = eventLoop.scheduleTask(in: TimeAmount(timeout)) { [self] in
                    guard case .connected(_, let channel) = state else { return }
                    ended(UpstreamError(.connectFailed, detail: "no HTTP/2 SETTINGS from \(target.host):\(target.port)"))
                    channel.close(promise: nil)
                }
            case .failure(let error):
                let timedOut = (error as? ChannelError).map { if case .connectTimeout = $0 { true } else { false } } ?? false
                ended(UpstreamError(timedOut ? .timedOut : .connectFailed, detail: "connect to \(target.host):\(target.port): \(error)"))
            }
        }
    }

    // MARK: Streams

    /// Starts waiting exchanges as streams while the backend's limit allows.
    private func startWaiting() {
        // The channel may be going already: NIO closes its streams before the connection's own
        // inactive event comes, and a stream started then would never be sent.
        guard case .ready(let multiplexer, let channel) = state, !goingAway, channel.isActive else { return }
        while active < maxStreams, let exchange = waiting.popFirst() {
            guard !exchange.isFinished else { continue }
            idleTimer?.cancel()
            idleTimer = nil
            active += 1
            let promise = eventLoop.makePromise(of: (any Channel).self)
            let scheme: HTTP2FramePayloadToHTTP1ClientCodec.HTTPProtocol = target.tls ? .https : .http
            multiplexer.createStreamChannel(promise: promise) { [self] stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: scheme))
                    try stream.pipeline.syncOperations.addHandler(HTTP2UpstreamStreamHandler(exchange: exchange, connection: self))
                }
            }
            promise.futureResult.whenFailure { [self] error in
                active -= 1
                exchange.streamFailedToOpen(error)
            }
        }
    }

    /// A stream of this connection closed.
    func streamEnded() {
        active -= 1
        if goingAway && active == 0 {
            close()
        } else {
            startWaiting()
            if active == 0 && waiting.isEmpty { startIdleTimer() }
        }
    }

    private func startIdleTimer() {
        idleTimer?.cancel()
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        idleTimer = eventLoop.scheduleTask(in: TimeAmount(client.configuration.idleTimeout)) {
            let connection = bound.value
            connection.idleTimer = nil
            guard connection.active == 0, connection.waiting.isEmpty else { return }
            // Out of the table first, so the next request opens a new connection.
            connection.goingAway = true
            connection.client.connectionEnded(connection)
            connection.close()
        }
    }

    // MARK: The backend's frames on stream 0

    /// The backend's SETTINGS: streams start once the first has come, so that its limit holds
    /// from the first stream (a server may refuse streams over a limit it has announced but not
    /// yet seen acknowledged).
    func settingsReceived(maxConcurrentStreams: Int?) {
        if let value = maxConcurrentStreams { maxStreams = max(1, min(value, 1000)) }
        if case .connected(let multiplexer, let channel) = state {
            state = .ready(multiplexer, channel)
            settingsTimer?.cancel()
            settingsTimer = nil
        }
        startWaiting()
        if active == 0 && waiting.isEmpty && idleTimer == nil { startIdleTimer() }
    }

    /// GOAWAY: no new streams here. NIO closes those above its last stream id, refused, and their
    /// exchanges go again on a new connection, with the ones still waiting here.
    func goAwayReceived(lastStreamID: HTTP2StreamID) {
        goAwayLastStream = min(goAwayLastStream ?? lastStreamID, lastStreamID)
        guard !goingAway else { return }
        goingAway = true
        client.connectionEnded(self)
        let stillWaiting = waiting
        waiting.removeAll()
        for exchange in stillWaiting where !exchange.isFinished {
            exchange.sendAgainUnsent(after: "the backend sent GOAWAY", client: client)
        }
        if active == 0 { close() }
    }

    /// Whether the backend's GOAWAY says it never processed `stream`.
    func isPastGoAway(_ stream: HTTP2StreamID) -> Bool {
        goAwayLastStream.map { stream > $0 } ?? false
    }

    /// The channel closed. Before the backend's SETTINGS, it never was an HTTP/2 connection (a
    /// TLS handshake that failed, a server that does not speak HTTP/2): a connect failure, whose
    /// exchanges were never sent. After them, the exchanges still waiting were not sent either,
    /// and go again on a new connection.
    func channelClosed() {
        let reason = lastError.map { ": \($0)" } ?? ""
        if case .connected = state {
            return ended(UpstreamError(.connectFailed, detail: "the backend closed the connection before its HTTP/2 SETTINGS\(reason)"))
        }
        let stillWaiting = waiting
        waiting.removeAll()
        ended(UpstreamError(.badResponse, detail: "the backend closed the HTTP/2 connection\(reason)"))
        for exchange in stillWaiting where !exchange.isFinished {
            exchange.sendAgainUnsent(after: "the connection closed", client: client)
        }
    }

    func close() {
        switch state {
        case .ready(_, let channel), .connected(_, let channel): channel.close(promise: nil)
        case .connecting: ended(UpstreamError(.shutdown, detail: "closed"))
        case .closed: break
        }
    }

    /// The connection is gone: exchanges still waiting fail with `error` (they never reached the
    /// backend; a retry is the caller's decision).
    private func ended(_ error: UpstreamError) {
        if case .closed = state { return }
        state = .closed
        idleTimer?.cancel()
        idleTimer = nil
        settingsTimer?.cancel()
        settingsTimer = nil
        client.connectionEnded(self)
        let stillWaiting = waiting
        waiting.removeAll()
        for exchange in stillWaiting { exchange.fail(error) }
    }
}

/// Watches a backend connection's stream 0: its SETTINGS (the stream limit), GOAWAY and the close.
final class HTTP2UpstreamConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let connection: HTTP2UpstreamConnection

    init(connection: HTTP2UpstreamConnection) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .settings(.settings(let settings)):
            connection.settingsReceived(maxConcurrentStreams: settings.last { $0.parameter == .maxConcurrentStreams }?.value)
        case .goAway(let lastStreamID, _, _):
            connection.goAwayReceived(lastStreamID: lastStreamID)
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.channelClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A connection error or a failed TLS handshake: the connection is done. NIO has written
        // its GOAWAY and flushes it after this call, so the close waits a loop tick.
        guard !(error is NIOHTTP2Errors.StreamError) else { return }
        connection.lastError = connection.lastError ?? error
        let channel = context.channel
        context.eventLoop.execute { channel.close(promise: nil) }
    }
}
