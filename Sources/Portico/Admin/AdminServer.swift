import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PorticoPolicy

/// The admin listener: a small HTTP/1.1 server apart from the public listeners, answering
/// ``AdminAPI``. Plain HTTP: it belongs on loopback or an operator network, and off loopback every
/// request needs the bearer token.
///
/// Its address and port are read at start (a reload reports a change as needing a restart); it
/// stays up while the gateway drains, so `/readyz` can say 503, and is closed last.
public final class AdminServer: Sendable {
    private let channel: any Channel

    /// The port it is bound to (the policy's, or the one the system chose for port 0).
    public var port: Int { channel.localAddress?.port ?? 0 }

    private init(channel: any Channel) { self.channel = channel }

    /// Binds the admin listener of `policy` for `gateway`; `reloader` serves `POST /admin/reload`.
    public static func start(
        _ policy: AdminPolicy, gateway: Gateway, reloader: PolicyReloader?,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger
    ) async throws -> AdminServer {
        let api = AdminAPI(gateway: gateway, reloader: reloader, boundAddress: policy.address)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(AdminHandler(api: api))
                }
            }
            .bind(host: policy.address, port: policy.port).get()
        logger.info("admin listening", metadata: ["address": .string("\(channel.localAddress!)")])
        return AdminServer(channel: channel)
    }

    public func shutdown() async {
        try? await channel.close()
    }
}

/// One admin connection: collects a request (its body is not needed and is dropped, up to a
/// bound), asks ``AdminAPI`` for the answer, writes it.
final class AdminHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Admin requests carry no body worth reading; a larger one closes the connection.
    static let maxBodyBytes = 64 * 1024

    private let api: AdminAPI
    private var head: HTTPRequestHead?
    private var bodyBytes = 0

    init(api: AdminAPI) { self.api = api }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            bodyBytes = 0
        case .body(let part):
            bodyBytes += part.readableBytes
            if bodyBytes > Self.maxBodyBytes { context.close(promise: nil) }
        case .end:
            guard let head else { return }
            self.head = nil
            let api = api
            let method = head.method
            let uri = head.uri
            let authorization = head.headers.first(name: "authorization")
            var origin = AdminAPI.RequestOrigin(host: head.headers.first(name: "host"), origin: head.headers.first(name: "origin"))
            origin.peer = ClientAddress.bytes(context.channel.remoteAddress)
            origin.accept = head.headers["accept"].joined(separator: ", ")
            origin.consoleToken = head.headers.first(name: "x-portico-console")
            origin.fetchSite = head.headers.first(name: "sec-fetch-site")
            let promise = context.eventLoop.makePromise(of: AdminAPI.Response.self)
            promise.completeWithTask { await api.respond(method: method, uri: uri, authorization: authorization, from: origin) }
            promise.futureResult.assumeIsolated().whenSuccess { response in
                self.write(response, for: head, context: context)
            }
        }
    }

    private func write(_ response: AdminAPI.Response, for request: HTTPRequestHead, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: response.contentType)
        headers.add(name: "Content-Length", value: String(response.body.count))
        headers.add(name: "Cache-Control", value: "no-store")
        // Never read as another type, never embedded by another site's page.
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        headers.add(name: "Cross-Origin-Resource-Policy", value: "same-origin")
        for (name, value) in response.headers { headers.add(name: name, value: value) }
        if !request.isKeepAlive { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: response.status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        let channel = context.channel
        let keepAlive = request.isKeepAlive
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}
