import NIOCore

/// One WebSocket connection through the gateway once both ends have switched: the client's channel
/// and the backend's, joined by a ``StreamRelayHandler`` on each, on one event loop.
///
/// It keeps what the two relays share: the frame cursor of each direction, the bytes each way, the
/// idle and lifetime clocks, and how the stream ended. It closes the stream itself when a limit is
/// reached, the gateway shuts down or the key is revoked, with a close frame to each side where
/// that side's direction is between frames, and ends once both channels have closed: then its
/// exchange is logged and its place given back (``finished``). Confined to its event loop.
final class UpgradedStream {
    enum Side: Hashable {
        case client
        case backend
    }

    /// How a stream ended, as the access log says it.
    enum Ending: String, Sendable {
        case clientClosed = "client closed"
        case backendClosed = "backend closed"
        case idle = "idle timeout"
        case lifetime = "lifetime reached"
        case shutdown = "gateway shut down"
        case revoked = "key revoked"
        case failed = "connection failed"

        /// The close code sent to each side, when the gateway ends the stream itself.
        var closeCode: UInt16? {
            switch self {
            case .idle, .lifetime, .shutdown: WebSocketCloseCode.goingAway
            case .revoked: WebSocketCloseCode.policyViolation
            case .clientClosed, .backendClosed, .failed: nil
            }
        }
    }

    let eventLoop: any EventLoop
    private let idleTimeout: TimeAmount?
    private let maxLifetime: TimeAmount?
    private(set) var client: StreamRelayHandler?
    private(set) var backend: StreamRelayHandler?
    /// Client to backend, and backend to client.
    private var upstream = WebSocketFrameCursor()
    private var downstream = WebSocketFrameCursor()
    private(set) var bytesFromClient = 0
    private(set) var bytesFromBackend = 0
    private var lastActivity: NIODeadline
    private var idleTimer: Scheduled<Void>?
    private var lifetimeTimer: Scheduled<Void>?
    private(set) var ending: Ending?
    /// The side whose close frame came first, which began the closing handshake.
    private var closedFirst: Side?
    private var closedSides: Set<Side> = []
    private var finished: ((UpgradedStream) -> Void)?

    /// - Parameter finished: called once, when both channels have closed.
    init(eventLoop: any EventLoop, idleTimeout: Duration?, maxLifetime: Duration?, finished: @escaping (UpgradedStream) -> Void) {
        self.eventLoop = eventLoop
        self.idleTimeout = idleTimeout.map(TimeAmount.init)
        self.maxLifetime = maxLifetime.map(TimeAmount.init)
        self.finished = finished
        lastActivity = eventLoop.now
    }

    /// Knows its relays, before they are added to their channels.
    func join(client: StreamRelayHandler, backend: StreamRelayHandler) {
        self.client = client
        self.backend = backend
    }

    /// Runs, once both relays are in place and HTTP's handlers gone: its clocks start, and a side
    /// whose connection closed meanwhile (a backend that hung up right after its `101`) ends the
    /// stream now, since no close will reach its relay any more.
    func start() {
        let loop = eventLoop.assumeIsolated()
        if let idleTimeout { idleTimer = loop.scheduleTask(in: idleTimeout) { [self] in idleCheck() } }
        if let maxLifetime { lifetimeTimer = loop.scheduleTask(in: maxLifetime) { [self] in close(.lifetime) } }
        for relay in [client, backend] {
            guard let relay, !relay.isActive else { continue }
            sideEnded(relay.side, failed: false)
            channelClosed(relay.side)
        }
    }

    // MARK: From the relays

    /// `bytes` arrived from `side` and go on to the other.
    func relayed(_ bytes: ByteBuffer, from side: Side) {
        lastActivity = eventLoop.now
        switch side {
        case .client:
            bytesFromClient += bytes.readableBytes
            upstream.advance(over: bytes)
            if closedFirst == nil, upstream.sawClose { closedFirst = .client }
        case .backend:
            bytesFromBackend += bytes.readableBytes
            downstream.advance(over: bytes)
            if closedFirst == nil, downstream.sawClose { closedFirst = .backend }
        }
    }

    /// `side`'s peer closed, or its connection failed: the other side is closed once what it was
    /// sent has left. The stream ended as the side that sent the first close frame wanted (a
    /// server closes TCP first after a client's close), else as the side that hung up.
    func sideEnded(_ side: Side, failed: Bool) {
        if ending == nil { ending = failed ? .failed : ((closedFirst ?? side) == .client ? .clientClosed : .backendClosed) }
        other(of: side)?.closeAfterWrites()
    }

    /// `side`'s channel has closed; once both have, the stream has ended.
    func channelClosed(_ side: Side) {
        closedSides.insert(side)
        guard closedSides.count == 2, let finished else { return }
        self.finished = nil
        idleTimer?.cancel()
        lifetimeTimer?.cancel()
        finished(self)
    }

    // MARK: Closing

    /// Ends the stream for `reason`: a close frame to each side whose direction is between frames
    /// (else a plain TCP close), then both connections close once their writes have left.
    func close(_ reason: Ending) {
        guard ending == nil else { return }
        ending = reason
        idleTimer?.cancel()
        lifetimeTimer?.cancel()
        if let code = reason.closeCode {
            if downstream.atBoundary { client?.writeOwnFrame(WebSocketFrameCursor.serverClose(code)) }
            if upstream.atBoundary { backend?.writeOwnFrame(WebSocketFrameCursor.clientClose(code)) }
        }
        client?.closeAfterWrites()
        backend?.closeAfterWrites()
    }

    private func idleCheck() {
        guard ending == nil, let idleTimeout else { return }
        let quiet = eventLoop.now - lastActivity
        guard quiet < idleTimeout else { return close(.idle) }
        idleTimer = eventLoop.assumeIsolated().scheduleTask(in: idleTimeout - quiet) { [self] in idleCheck() }
    }

    private func other(of side: Side) -> StreamRelayHandler? {
        side == .client ? backend : client
    }

    func partner(of relay: StreamRelayHandler) -> StreamRelayHandler? {
        relay === client ? backend : client
    }
}

/// Relays the bytes of one side of an ``UpgradedStream`` to the other, reading from its channel
/// only while the other side's channel is writable: a slow reader at one end slows the other end's
/// sender through TCP, and the gateway holds at most a channel's write buffer per direction.
/// The shape is swift-nio-examples' connect-proxy "glue" handler's.
final class StreamRelayHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let side: UpgradedStream.Side
    private let stream: UpgradedStream
    private var context: ChannelHandlerContext?
    private var readPending = false
    private var closing = false

    init(side: UpgradedStream.Side, stream: UpgradedStream) {
        self.side = side
        self.stream = stream
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // A channel already closed is seen by the stream's start, once every handler is in place.
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    var isWritable: Bool { context?.channel.isWritable ?? false }
    var isActive: Bool { context?.channel.isActive ?? false }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        stream.relayed(bytes, from: side)
        stream.partner(of: self)?.write(bytes)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        stream.partner(of: self)?.flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { stream.partner(of: self)?.resumeReading() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stream.sideEnded(side, failed: false)
        stream.channelClosed(side)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // A quiescing gateway lets streams run until its drain time is up; then it closes them
        // (see `close(context:mode:promise:)`).
        if event is ChannelShouldQuiesceEvent { return }
        // An HTTP/2 stream's END_STREAM (``TunnelStreamAdapter``): this side has ended.
        if let channelEvent = event as? ChannelEvent, channelEvent == .inputClosed { return stream.sideEnded(side, failed: false) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        stream.sideEnded(side, failed: true)
        context.close(promise: nil)
    }

    // MARK: Outbound

    func read(context: ChannelHandlerContext) {
        if stream.partner(of: self)?.isWritable ?? true {
            context.read()
        } else {
            readPending = true
        }
    }

    /// A close from outside the stream (the gateway closing what is left at the end of its drain):
    /// the stream ends as shutting down, with its close frames, and this channel closes after.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, stream.ending == nil else { return context.close(mode: mode, promise: promise) }
        stream.close(.shutdown)
        context.channel.closeFuture.cascade(to: promise)
    }

    // MARK: From the partner

    private func write(_ bytes: ByteBuffer) {
        guard let context, !closing else { return }
        context.write(wrapOutboundOut(bytes), promise: nil)
    }

    private func flush() {
        context?.flush()
    }

    private func resumeReading() {
        guard readPending, let context else { return }
        readPending = false
        context.read()
    }

    /// A frame of the gateway's own (a close), written between two of the peer's frames.
    func writeOwnFrame(_ frame: ByteBuffer) {
        guard let context, !closing else { return }
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
    }

    /// Closes this side once everything written to it has left (an empty write completes after
    /// every write before it), or after ``lingerLimit`` if its peer does not read them.
    func closeAfterWrites() {
        guard let context, !closing else { return }
        closing = true
        let channel = context.channel
        let linger = context.eventLoop.scheduleTask(in: Self.lingerLimit) { channel.close(promise: nil) }
        context.writeAndFlush(wrapOutboundOut(ByteBuffer())).whenComplete { _ in
            linger.cancel()
            channel.close(promise: nil)
        }
    }

    /// How long a closing side's last bytes may take to leave before the connection is cut.
    static let lingerLimit = TimeAmount.seconds(5)
}
