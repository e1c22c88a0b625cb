import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import PorticoTLS
import Synchronization

/// A backend that speaks HTTP/2 only: prior knowledge on plain TCP (`h2c`), or TLS with ALPN `h2`
/// (through PorticoTLS's server handler). Every request gets 200 with `h2 <path> connection <n>`
/// once `answerDelay` has passed. It counts connections, requests and the most streams it had
/// open at once, announces `maxConcurrentStreams`, and after `goAwayAfter` requests on a
/// connection sends GOAWAY naming the last stream it answers, so the streams the client opened
/// after it are refused unprocessed.
public final class HTTP2Backend: Sendable {
    public let port: Int
    private let channel: any Channel
    private let counters: Counters

    final class Counters: Sendable {
        let connections = Atomic<Int>(0)
        let closed = Atomic<Int>(0)
        let requests = Atomic<Int>(0)
        let open = Atomic<Int>(0)
        let mostOpen = Atomic<Int>(0)

        func streamOpened() {
            let now = open.wrappingAdd(1, ordering: .relaxed).newValue
            var seen = mostOpen.load(ordering: .relaxed)
            while now > seen {
                let (exchanged, original) = mostOpen.compareExchange(expected: seen, desired: now, ordering: .relaxed)
                if exchanged { break }
                seen = original
            }
        }
    }

    public var connectionsAccepted: Int { counters.connections.load(ordering: .relaxed) }
    /// Connections that have ended, whichever side closed them.
    public var connectionsClosed: Int { counters.closed.load(ordering: .relaxed) }
    public var requestsAnswered: Int { counters.requests.load(ordering: .relaxed) }
    public var mostStreamsOpenAtOnce: Int { counters.mostOpen.load(ordering: .relaxed) }

    private init(port: Int, channel: any Channel, counters: Counters) {
        self.port = port
        self.channel = channel
        self.counters = counters
    }

    /// - Parameter tls: a context whose ALPN offers `h2`, for `h2`; nil for `h2c`.
    public static func start(
        tls: TLSContext? = nil, maxConcurrentStreams: Int = 100, goAwayAfter: Int? = nil, answerDelay: TimeAmount = .zero
    ) async throws -> HTTP2Backend {
        let counters = Counters()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connection = counters.connections.wrappingAdd(1, ordering: .relaxed).newValue
                    channel.closeFuture.whenComplete { _ in counters.closed.wrappingAdd(1, ordering: .relaxed) }
                    let pipeline = channel.pipeline.syncOperations
                    if let tls, let handler = TLSServerHandler(context: tls) { try pipeline.addHandler(handler) }
                    let answered = NIOLoopBound(Box(), eventLoop: channel.eventLoop)
                    var configuration = NIOHTTP2Handler.ConnectionConfiguration()
                    configuration.initialSettings = [HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams)]
                    let http2 = NIOHTTP2Handler(mode: .server, eventLoop: channel.eventLoop, connectionConfiguration: configuration) {
                        stream in
                        stream.eventLoop.makeCompletedFuture {
                            counters.streamOpened()
                            stream.closeFuture.whenComplete { _ in counters.open.wrappingSubtract(1, ordering: .relaxed) }
                            try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                            try stream.pipeline.syncOperations.addHandler(
                                Responder(connection: connection, delay: answerDelay) { streamID in
                                    let box = answered.value
                                    if let last = box.lastStream, streamID > last { return false }
                                    counters.requests.wrappingAdd(1, ordering: .relaxed)
                                    box.count += 1
                                    guard let goAwayAfter, box.count == goAwayAfter, let parent = stream.parent else { return true }
                                    box.lastStream = streamID
                                    let frame = HTTP2Frame(
                                        streamID: .rootStream,
                                        payload: .goAway(lastStreamID: streamID, errorCode: .noError, opaqueData: nil))
                                    parent.writeAndFlush(frame, promise: nil)
                                    return true
                                })
                        }
                    }
                    try pipeline.addHandler(http2)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return HTTP2Backend(port: channel.localAddress!.port!, channel: channel, counters: counters)
    }

    public func shutdown() async throws { try await channel.close() }

    final class Box {
        var count = 0
        /// The last stream of the GOAWAY sent, if one was: later streams are not processed.
        var lastStream: HTTP2StreamID?
    }

    /// Answers one stream's request once it has ended.
    final class Responder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let connection: Int
        let delay: TimeAmount
        /// Counts the answer about to be sent; false for a stream past the GOAWAY sent (not processed).
        let answered: (HTTP2StreamID) -> Bool
        var path = ""

        init(connection: Int, delay: TimeAmount, answered: @escaping (HTTP2StreamID) -> Bool) {
            self.connection = connection
            self.delay = delay
            self.answered = answered
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): path = head.uri
            case .body: break
            case .end:
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: delay) {
                    let (handler, context) = bound.value
                    handler.respond(context: context)
                }
            }
        }

        private func respond(context: ChannelHandlerContext) {
            guard let id = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID), answered(id) else { return }
            let body = ByteBuffer(string: "h2 \(path) connection \(connection)")
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: String(body.readableBytes))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http2, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
