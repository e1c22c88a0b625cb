import NIOCore
import NIOHTTP1
import PorticoPolicy

/// The handlers every client connection gets above TLS: for HTTP/1.1, timeouts, then the
/// ``GatewayHandler``, which reads the requests from the bytes (``HTTP1RequestDecoder``, with the
/// policy's head limits) and writes the responses' bytes itself, checking the heads it writes
/// (``Exchange/refusal(of:)``); for HTTP/2, ``HTTP2Pipeline``'s. Which one a
/// connection gets is decided by ``configureAccepted(_:tls:)``: at once, after the TLS handshake
/// (ALPN), or after the first bytes (a plain listener with both HTTP/1.1 and h2c).
///
/// Built once per listener from the limits of the snapshot current at start, and applied to each
/// accepted connection. It is its own type so that everything that drives the gateway's real
/// pipeline (the listener's child-channel initialiser, the `EmbeddedChannel` fuzz target under
/// `fuzz/`) builds it from the same code: a handler added here is exercised everywhere at once.
struct ConnectionPipeline: Sendable {
    let services: GatewayServices
    let limits: LimitsPolicy
    /// What the listener speaks (``ListenerPolicy/protocols``).
    let protocols: [ListenerProtocol]
    /// The request stages; the standard ones unless a test puts its own in.
    let stages: RequestStages
    /// The handlers every connection's exchanges start, shared (see ``ExchangeHandlers``).
    let handlers: ExchangeHandlers
    /// The listener's name, which each connection's exchanges know it by (`tracing.trustIncoming`).
    var listener: String?
    private let headTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private let sendTimeout: TimeAmount

    init(services: GatewayServices, limits: LimitsPolicy, protocols: [ListenerProtocol] = [.http11], stages: RequestStages? = nil) {
        self.services = services
        self.limits = limits
        self.protocols = protocols
        self.stages = stages ?? .standard(services)
        self.handlers = ExchangeHandlers(services: services)
        self.headTimeout = TimeAmount(limits.headTimeout)
        self.idleTimeout = TimeAmount(limits.idleTimeout)
        self.sendTimeout = TimeAmount(limits.sendTimeout)
    }

    /// Sets up a connection just accepted, after any TLS handler already in it. Runs on the
    /// channel's event loop.
    func configureAccepted(_ channel: any Channel, tls: Bool) throws {
        let pipeline = channel.pipeline.syncOperations
        if tls {
            try pipeline.addHandler(ALPNProtocolSelector(pipeline: self))
        } else if !protocols.contains(.h2c) {
            try configure(pipeline)
        } else if protocols.contains(.http11) {
            try pipeline.addHandler(HTTP2PrefaceSniffer(pipeline: self))
        } else {
            try HTTP2Pipeline(self).configure(channel, client: ClientConnection())
        }
    }

    /// Adds the HTTP/1.1 handlers to a connection's pipeline, after any TLS handler already in it.
    /// Runs on the channel's event loop.
    func configure(_ pipeline: ChannelPipeline.SynchronousOperations) throws {
        let timeouts = ConnectionTimeoutHandler(
            headTimeout: headTimeout, idleTimeout: idleTimeout, sendTimeout: sendTimeout, minBodyRate: limits.minBodyRate)
        try pipeline.addHandler(timeouts)
        // The gateway handler reads the requests from the connection's bytes and writes the
        // responses' bytes itself (see GatewayHandler): no handler of NIO's HTTP/1.1 codec is here.
        // Upgrades too (a WebSocket handshake is proxied, see StreamJoin): the handler hands on,
        // when it leaves, the bytes a client sent after its handshake.
        try pipeline.addHandler(
            GatewayHandler(
                services: services, handlers: handlers, timeouts: timeouts, stages: stages, client: ClientConnection(listener: listener),
                wire: .http1(Self.requestDecoder(limits))))
    }

    /// The HTTP/1.1 connection's request decoder with the policy's limits, as every connection gets
    /// it (the fuzz harness reads its inputs with it, so that it reads requests as the gateway does).
    static func requestDecoder(_ limits: LimitsPolicy) -> HTTP1RequestDecoder {
        HTTP1RequestDecoder(maxHeadBytes: limits.maxHeadBytes, maxFieldCount: limits.maxHeaderCount)
    }
}
