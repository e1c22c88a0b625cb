import NIOCore
import PorticoPolicy
import PorticoTLS

/// Waits, on a TLS connection, for the handshake, then builds the pipeline of the protocol ALPN
/// agreed on (HTTP/2 or HTTP/1.1; without ALPN, HTTP/1.1 if the listener speaks it), and steps
/// aside. It also counts handshakes, completed and failed, for every TLS listener.
///
/// The TLS handler sends ``TLSHandshakeCompleted`` before any application byte, so nothing is read
/// before the pipeline above it exists.
final class ALPNProtocolSelector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let pipeline: ConnectionPipeline
    private var completed = false

    init(pipeline: ConnectionPipeline) {
        self.pipeline = pipeline
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let handshake = event as? TLSHandshakeCompleted else { return context.fireUserInboundEventTriggered(event) }
        completed = true
        pipeline.services.metrics?.tlsHandshakeCompleted()
        let speaksHTTP1 = pipeline.protocols.contains(.http11)
        let http2 = handshake.info.applicationProtocol.map { $0 == "h2" } ?? !speaksHTTP1
        do {
            if http2 {
                var client = ClientConnection()
                client.tls = handshake.info
                client.certificate = handshake.certificate
                try HTTP2Pipeline(pipeline).configure(context.channel, client: client)
            } else {
                try pipeline.configure(context.pipeline.syncOperations)
                // For the exchange: the client's certificate, SNI's choice.
                context.fireUserInboundEventTriggered(event)
            }
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        } catch {
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Closed before its handshake completed: refused, failed or abandoned.
        if !completed { pipeline.services.metrics?.tlsHandshakeFailed() }
        context.fireChannelInactive()
    }
}

/// On a plain listener that speaks both HTTP/1.1 and h2c: reads until the first bytes tell the
/// HTTP/2 connection preface (RFC 9113 §3.4) from an HTTP/1.1 request line, builds that
/// protocol's pipeline, passes on what it read and steps aside. A client that sends nothing is
/// closed after `idleTimeout`, as an idle HTTP/1.1 connection would be.
final class HTTP2PrefaceSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let pipeline: ConnectionPipeline
    private var buffered: ByteBuffer?
    private var timer: Scheduled<Void>?

    init(pipeline: ConnectionPipeline) {
        self.pipeline = pipeline
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: TimeAmount(pipeline.limits.idleTimeout)) { bound.value.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if var earlier = buffered {
            earlier.writeBuffer(&bytes)
            bytes = earlier
        }
        let preface = HTTP2FrameScanner.preface
        let compared = min(bytes.readableBytes, preface.count)
        let isPreface = bytes.readableBytesView.prefix(compared).elementsEqual(preface.prefix(compared))
        guard !isPreface || compared == preface.count else {
            buffered = bytes  // so far, the preface: wait for the rest
            return
        }
        buffered = nil
        do {
            if isPreface {
                try HTTP2Pipeline(pipeline).configure(context.channel, client: ClientConnection())
            } else {
                try pipeline.configure(context.pipeline.syncOperations)
            }
        } catch {
            return context.close(promise: nil)
        }
        context.fireChannelRead(wrapInboundOut(bytes))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
