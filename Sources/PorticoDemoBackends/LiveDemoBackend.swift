import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// The demo's live backend, for the streams the gateway passes through (docs/streaming.md):
///
/// - a WebSocket handshake on any path opens an echo: each text or binary message comes back as
///   it was sent, a ping gets its pong, a close is answered with the same code;
/// - `GET /ticks` answers a server-sent event stream (`text/event-stream`) with one event a second,
///   `id: N` and `data: {"tick":N,"time":"…"}`, for as long as the client reads (or, with
///   `?count=N`, for N events, then the stream ends cleanly); a client's `Last-Event-ID` resumes
///   after that event, as an EventSource does when it reconnects.
///
/// The WebSocket side is SwiftNIO's own (`NIOWebSocketServerUpgrader`), so the gateway is checked
/// against a server it did not write.
public enum LiveDemoBackend {
    public static let port = 18088
    /// Time between two ticks.
    public static let tickInterval = TimeAmount.seconds(1)

    public static func start(
        host: String = "127.0.0.1", port: Int = port, tickInterval: TimeAmount = tickInterval
    ) async throws
        -> BackendServer
    {
        try await BackendServer.start(host: host, port: port) { channel, _ in
            let upgrader = NIOWebSocketServerUpgrader(
                maxFrameSize: 1 << 24,
                shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
                upgradePipelineHandler: { channel, _ in
                    channel.eventLoop.makeCompletedFuture {
                        // The HTTP handler leaves with HTTP's own: frames go to the echo.
                        let pipeline = channel.pipeline.syncOperations
                        pipeline.removeHandler(context: try pipeline.context(handlerType: TickingEvents.self), promise: nil)
                        try pipeline.addHandler(WebSocketEcho())
                    }
                })
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
            try channel.pipeline.syncOperations.addHandler(TickingEvents(interval: tickInterval))
        }
    }
}

/// Echoes every message of a WebSocket connection, answers pings, and answers a close with a close.
final class WebSocketEcho: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private var closing = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary, .continuation:
            context.writeAndFlush(
                wrapOutboundOut(WebSocketFrame(fin: frame.fin, opcode: frame.opcode, data: frame.unmaskedData)), promise: nil)
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            guard !closing else { return context.close(promise: nil) }
            closing = true
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)))
                .whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }
}

/// `GET /ticks`: an event a tick, as long as the connection lasts; anything else is a 404.
final class TickingEvents: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let interval: TimeAmount
    private var ticker: RepeatedTask?
    /// The last event's number, and the one the stream ends at (`?count=`).
    private var tick = 0
    private var last: Int?

    init(interval: TimeAmount) {
        self.interval = interval
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        guard head.method == .GET, head.uri.split(separator: "?").first == "/ticks" else {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "0")
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .notFound, headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream")
        headers.add(name: "Cache-Control", value: "no-store")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "retry: 2000\n\n")))), promise: nil)
        tick = head.headers.first(name: "last-event-id").flatMap(Int.init) ?? 0
        last = Self.count(in: head.uri).map { tick + $0 }
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        ticker = context.eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: interval) { _ in
            bound.value.handler.sendTick(context: bound.value.context)
        }
    }

    private func sendTick(context: ChannelHandlerContext) {
        tick += 1
        let event = "id: \(tick)\ndata: {\"tick\":\(tick),\"time\":\"\(Date().formatted(.iso8601))\"}\n\n"
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: event)))), promise: nil)
        if let last, tick >= last {
            ticker?.cancel()
            ticker = nil
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    /// The `count` query parameter: how many events this stream sends before it ends.
    static func count(in uri: String) -> Int? {
        guard let query = uri.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        for pair in query.split(separator: "&") where pair.hasPrefix("count=") {
            return Int(pair.dropFirst("count=".count)).flatMap { $0 > 0 ? $0 : nil }
        }
        return nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        ticker?.cancel()
        ticker = nil
        context.fireChannelInactive()
    }
}
