import NIOCore
import PorticoPolicy
import PorticoTLS

/// Guards an HTTP/2 connection below NIO's HTTP/2 handler, where it sees the client's bytes before
/// they are parsed and the gateway's as they leave, against what that handler does not bound:
///
/// - a header block that never ends (HEADERS without END_HEADERS, then nothing, or CONTINUATION
///   frames dribbled in): it must be whole within `headTimeout` of its first frame, as an HTTP/1.1
///   head must, since no other frame, of any stream, may arrive meanwhile;
/// - a flood of WINDOW_UPDATE frames (more than `maxWindowUpdates` within `floodWindow`);
/// - a client that stops reading the connection: the channel unwritable for `sendTimeout`.
///
/// The first two are answered with GOAWAY (ENHANCE_YOUR_CALM), naming the last stream the client
/// opened, and a close; the third with a close at once, since nothing queued would reach such a
/// client. Resets, SETTINGS, PING and empty-DATA floods and oversized header blocks are NIO's
/// (``HTTP2Pipeline`` configures them); streams are guarded by their own ``TimeoutHandler``.
final class HTTP2ConnectionGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private var scanner: HTTP2FrameScanner
    private let headTimeout: TimeAmount
    private let sendTimeout: TimeAmount
    private var headerDeadline: Scheduled<Void>?
    private var sendDeadline: Scheduled<Void>?
    private var closing = false
    /// SETTINGS_MAX_CONCURRENT_STREAMS as the client is told it, written into NIO's first SETTINGS
    /// frame (NIO's own is higher: see ``HTTP2StreamAdmission``); nil once written.
    private var advertisedMaxStreams: Int?
    /// Counts what the guard cut off (`nil` in tests that need no metrics).
    private let metrics: GatewayMetrics?

    init(limits: LimitsPolicy, advertisedMaxStreams: Int? = nil, metrics: GatewayMetrics?) {
        self.advertisedMaxStreams = advertisedMaxStreams
        scanner = HTTP2FrameScanner(maxWindowUpdates: limits.http2.maxWindowUpdates, floodWindow: TimeAmount(limits.http2.floodWindow))
        headTimeout = TimeAmount(limits.headTimeout)
        sendTimeout = TimeAmount(limits.sendTimeout)
        self.metrics = metrics
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimers()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        for event in scanner.scan(unwrapInboundIn(data), now: context.eventLoop.now) {
            switch event {
            case .headerBlockStarted:
                guard headerDeadline == nil else { continue }
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                headerDeadline = context.eventLoop.scheduleTask(in: headTimeout) {
                    let (handler, context) = bound.value
                    handler.headerDeadline = nil
                    handler.goAway(context: context, reason: .headerTimeout)
                }
            case .headerBlockEnded:
                headerDeadline?.cancel()
                headerDeadline = nil
            case .windowUpdateFlood:
                return goAway(context: context, reason: .windowUpdates)
            }
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is HTTP2StreamAdmission.TooManyRefusals { return goAway(context: context, reason: .resets) }
        context.fireUserInboundEventTriggered(event)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard let advertised = advertisedMaxStreams, case .byteBuffer(var bytes) = unwrapOutboundIn(data) else {
            return context.write(data, promise: promise)
        }
        advertisedMaxStreams = nil
        Self.setMaxConcurrentStreams(advertised, inFirstSettingsFrameOf: &bytes)
        context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: promise)
    }

    /// Rewrites SETTINGS_MAX_CONCURRENT_STREAMS in `bytes`, if they begin with a SETTINGS frame
    /// that carries it (NIO's preamble does: its first write on the connection).
    static func setMaxConcurrentStreams(_ value: Int, inFirstSettingsFrameOf bytes: inout ByteBuffer) {
        let start = bytes.readerIndex
        guard let header = bytes.getBytes(at: start, length: 9), header[3] == 0x4, header[4] & 0x1 == 0 else { return }
        let length = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
        guard bytes.readableBytes >= 9 + length else { return }
        var offset = start + 9
        while offset + 6 <= start + 9 + length {
            if bytes.getInteger(at: offset, as: UInt16.self) == 0x3 { bytes.setInteger(UInt32(value), at: offset + 2) }
            offset += 6
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            sendDeadline?.cancel()
            sendDeadline = nil
        } else if sendDeadline == nil {
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            sendDeadline = context.eventLoop.scheduleTask(in: sendTimeout) {
                let (handler, context) = bound.value
                handler.sendDeadline = nil
                handler.closing = true
                context.triggerUserOutboundEvent(CloseImmediatelyEvent(), promise: nil)
                context.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    /// Tells the client why (RFC 9113 §6.8, written below NIO's handler, whose state no longer
    /// matters) and closes once that has left.
    private func goAway(context: ChannelHandlerContext, reason: GatewayMetrics.HTTP2Refusal) {
        guard !closing else { return }
        closing = true
        cancelTimers()
        metrics?.http2ConnectionRefused(reason)
        var frame = context.channel.allocator.buffer(capacity: 17)
        frame.writeBytes([0, 0, 8, 0x7, 0, 0, 0, 0, 0])  // length 8, GOAWAY, no flags, stream 0
        frame.writeInteger(scanner.lastClientStream)
        frame.writeInteger(UInt32(0xb))  // ENHANCE_YOUR_CALM
        HTTP2IdleHandler.closeAfter(context.writeAndFlush(wrapOutboundOut(.byteBuffer(frame))), within: sendTimeout, context: context)
    }

    private func cancelTimers() {
        headerDeadline?.cancel()
        headerDeadline = nil
        sendDeadline?.cancel()
        sendDeadline = nil
    }
}
