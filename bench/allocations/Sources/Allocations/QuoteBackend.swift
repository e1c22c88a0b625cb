import NIOCore
import NIOHTTP1
import NIOPosix

/// The backend: a small JSON answer from memory for every request, keep-alive, on its own event loop
/// so that its allocations never count as the gateway's.
enum QuoteBackend {
    static let body = #"{"symbol":"AAPL","name":"Apple Inc.","currentPrice":189.84}"#

    static func start(group: any EventLoopGroup) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        private var head: HTTPResponseHead = {
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            headers.add(name: "content-length", value: String(QuoteBackend.body.utf8.count))
            return HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)
        }()
        private let body = ByteBuffer(string: QuoteBackend.body)

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
