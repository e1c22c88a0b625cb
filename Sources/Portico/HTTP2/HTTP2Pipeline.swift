import NIOCore
import NIOHTTP1
import NIOHTTP2
import PorticoPolicy

/// The handlers of an HTTP/2 connection and of each of its streams.
///
/// The connection: ``HTTP2ConnectionGuard`` (header blocks that never end, WINDOW_UPDATE floods, a
/// client that stops reading), NIO's `NIOHTTP2Handler` with the policy's `limits.http2` (SETTINGS,
/// windows, and its own defences: reset, control-frame and empty-DATA floods, CONTINUATION counts,
/// header blocks bounded as they arrive, malformed requests refused per stream), NIO's connection
/// management handler (a quiescing gateway's two-step GOAWAY, the close once the last stream is
/// done) and ``HTTP2IdleHandler``. Each stream: an ``ExtendedConnectReader`` (the `:protocol` of
/// an RFC 8441 WebSocket, which the codec drops), NIO's HTTP/2-to-HTTP/1 codec, a
/// ``TimeoutHandler`` for its body and its sends, and a ``GatewayHandler``, so a stream runs
/// exactly the exchange, stages and handlers an HTTP/1.1 request does.
struct HTTP2Pipeline: Sendable {
    let connection: ConnectionPipeline
    private let connectionConfiguration: NIOHTTP2Handler.ConnectionConfiguration
    private let streamConfiguration: NIOHTTP2Handler.StreamConfiguration

    init(_ connection: ConnectionPipeline) {
        self.connection = connection
        let limits = connection.limits.http2
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            // Advertised as maxConcurrentStreams (see HTTP2StreamAdmission).
            HTTP2Setting(parameter: .maxConcurrentStreams, value: HTTP2StreamAdmission.nioLimit(for: limits.maxConcurrentStreams)),
            HTTP2Setting(parameter: .maxHeaderListSize, value: limits.maxHeaderListSize),
            HTTP2Setting(parameter: .headerTableSize, value: limits.headerTableSize),
            HTTP2Setting(parameter: .initialWindowSize, value: limits.initialWindowSize),
            // RFC 8441: a client may open a WebSocket on a stream with an extended CONNECT.
            HTTP2Setting(parameter: .enableConnectProtocol, value: 1),
        ]
        configuration.targetWindowSize = limits.connectionWindowSize
        // Control frames the gateway owes a client that does not read (PING and SETTINGS acks, resets).
        configuration.maximumBufferedControlFrames = 1000
        configuration.controlFrameRateLimit.maximumCount = limits.maxControlFrames
        configuration.controlFrameRateLimit.windowLength = TimeAmount(limits.floodWindow)
        connectionConfiguration = configuration
        var stream = NIOHTTP2Handler.StreamConfiguration()
        stream.targetWindowSize = limits.initialWindowSize
        // A response's bytes held per stream before the backend is paused (its credit waits for
        // the stream to drain), as much as a TLS record or two.
        stream.outboundBufferSizeHighWatermark = 64 * 1024
        stream.outboundBufferSizeLowWatermark = 32 * 1024
        stream.streamResetFrameRateLimit.maximumCount = limits.maxResets
        stream.streamResetFrameRateLimit.windowLength = TimeAmount(limits.floodWindow)
        stream.streamErrorRateLimit.maximumCount = limits.maxResets
        stream.streamErrorRateLimit.windowLength = TimeAmount(limits.floodWindow)
        streamConfiguration = stream
    }

    /// Makes `channel` an HTTP/2 connection (its preface is the next thing it reads). Runs on the
    /// channel's event loop.
    func configure(_ channel: any Channel, client: ClientConnection) throws {
        let pipeline = channel.pipeline.syncOperations
        let services = connection.services
        let limits = connection.limits
        // The client's address, once for all the connection's streams.
        var client = client
        client.address = channel.remoteAddress?.ipAddress
        client.addressSubject = ClientAddress.rateLimitSubject(channel.remoteAddress)
        client.peerBytes = ClientAddress.bytes(channel.remoteAddress)
        client.addressBytes = client.peerBytes
        let admission = NIOLoopBound(
            HTTP2StreamAdmission(
                limit: limits.http2.maxConcurrentStreams, maxRefusals: limits.http2.maxResets,
                floodWindow: TimeAmount(limits.http2.floodWindow)),
            eventLoop: channel.eventLoop)
        let management = NIOHTTP2ServerConnectionManagementHandler(
            eventLoop: channel.eventLoop,
            configuration: .init(maxIdleTime: nil, maxAge: nil, maxGraceTime: nil, keepalive: nil))
        let http2 = NIOHTTP2Handler(
            mode: .server, eventLoop: channel.eventLoop, connectionConfiguration: connectionConfiguration,
            streamConfiguration: streamConfiguration,
            streamDelegate: HTTP2StreamAdmission.Delegate(admission: admission, next: management.http2StreamDelegate)
        ) { [connection, client] stream in
            stream.eventLoop.makeCompletedFuture {
                let id = try stream.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
                switch admission.value.streamCreated(id, now: stream.eventLoop.now) {
                case .admit:
                    try connection.configureStream(stream.pipeline.syncOperations, client: client)
                case .refuse:
                    try stream.pipeline.syncOperations.addHandler(RefusedStreamHandler())
                case .goAway:
                    try stream.pipeline.syncOperations.addHandler(RefusedStreamHandler())
                    // Not from inside NIO's creation of this stream: the close would end it before
                    // NIO has finished making it.
                    if let parent = stream.parent {
                        stream.eventLoop.execute { parent.pipeline.fireUserInboundEventTriggered(HTTP2StreamAdmission.TooManyRefusals()) }
                    }
                }
            }
        }
        try pipeline.addHandler(
            HTTP2ConnectionGuard(limits: limits, advertisedMaxStreams: limits.http2.maxConcurrentStreams, metrics: services.metrics))
        try pipeline.addHandler(http2)
        try pipeline.addHandler(management)
        try pipeline.addHandler(
            HTTP2IdleHandler(
                idleTimeout: TimeAmount(limits.idleTimeout), sendTimeout: TimeAmount(limits.sendTimeout), metrics: services.metrics))
    }
}

extension ConnectionPipeline {
    /// One HTTP/2 stream: NIO's codec turns its frames into the HTTP/1-shaped parts the exchange
    /// reads (`:authority` becomes `Host`; a body without `content-length` is chunked).
    func configureStream(_ pipeline: ChannelPipeline.SynchronousOperations, client: ClientConnection) throws {
        var client = client
        client.listener = listener
        let timeouts = StreamTimeoutHandler(
            headTimeout: TimeAmount(limits.headTimeout), idleTimeout: TimeAmount(limits.idleTimeout),
            sendTimeout: TimeAmount(limits.sendTimeout), minBodyRate: limits.minBodyRate)
        let tunnel = ExtendedConnect()
        try pipeline.addHandler(ExtendedConnectReader(note: tunnel))
        try pipeline.addHandler(HTTP2EmptyBodyCoalescer())
        try pipeline.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
        try pipeline.addHandler(timeouts)
        try pipeline.addHandler(
            GatewayHandler(
                services: services, handlers: handlers, timeouts: timeouts, stages: stages, client: client, tunnel: tunnel, wire: .stream)
        )
    }
}
