import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A request as a ``BackendServer`` received it, body collected.
public struct BackendRequest: Sendable {
    public var method: HTTPMethod
    public var uri: String
    public var headers: HTTPHeaders
    public var body: ByteBuffer

    public var path: Substring { uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0] }
    public var query: Substring? {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return parts.count > 1 ? parts[1] : nil
    }
}

/// What a ``BackendServer`` answers.
public enum BackendResponse: Sendable {
    /// A complete response with `Content-Length`.
    case full(status: HTTPResponseStatus, headers: HTTPHeaders, body: ByteBuffer)
    /// `totalBytes` of generated data, written only while the connection is writable, so a slow
    /// reader makes this backend wait (as a real file server would).
    case stream(status: HTTPResponseStatus, headers: HTTPHeaders, totalBytes: Int)
    /// A body sent with chunked transfer coding (no `Content-Length`), one chunk per part.
    case chunked(status: HTTPResponseStatus, headers: HTTPHeaders, parts: [String])
    /// Never answers (a hung backend).
    case hang
    /// Closes the connection without answering (a crashed backend).
    case close
}

/// A small HTTP/1.1 server on SwiftNIO: the quick start's demo backends and the tests' real backends.
///
/// It counts accepted connections, so tests can show that the gateway reuses them.
public final class BackendServer: Sendable {
    public typealias Handler = @Sendable (BackendRequest) -> BackendResponse

    public let port: Int
    private let channel: any Channel
    private let counters: Counters

    final class Counters: Sendable {
        let connections = Atomic<Int>(0)
        let requests = Atomic<Int>(0)
        let streamedBytes = Atomic<Int>(0)
    }

    /// Connections accepted so far.
    public var connectionsAccepted: Int { counters.connections.load(ordering: .relaxed) }
    /// Bytes of `.stream` bodies handed to the socket so far.
    public var streamedBytes: Int { counters.streamedBytes.load(ordering: .relaxed) }
    /// Requests answered (or left hanging) so far.
    public var requestsReceived: Int { counters.requests.load(ordering: .relaxed) }

    private init(port: Int, channel: any Channel, counters: Counters) {
        self.port = port
        self.channel = channel
        self.counters = counters
    }

    public static func start(
        host: String = "127.0.0.1", port: Int = 0, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        handler: @escaping Handler
    ) async throws -> BackendServer {
        try await start(host: host, port: port, group: group) { channel, counters in
            try channel.pipeline.syncOperations.configureHTTPServerPipeline()
            try channel.pipeline.syncOperations.addHandler(BackendHandler(handler: handler, counters: counters))
        }
    }

    /// A server whose connections `configure` sets up itself (a protocol other than this type's
    /// request-and-response one: the live demo's WebSocket and event streams).
    static func start(
        host: String, port: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        configure: @escaping @Sendable (any Channel, Counters) throws -> Void
    ) async throws -> BackendServer {
        let counters = Counters()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counters.connections.wrappingAdd(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture { try configure(channel, counters) }
            }
            .bind(host: host, port: port).get()
        return BackendServer(port: channel.localAddress!.port!, channel: channel, counters: counters)
    }

    public func shutdown() async throws {
        try await channel.close()
    }
}

final class BackendHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let handler: BackendServer.Handler
    private let counters: BackendServer.Counters
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    private var streamRemaining = 0
    private var keepAlive = true

    init(handler: @escaping BackendServer.Handler, counters: BackendServer.Counters) {
        self.handler = handler
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            guard let head else { return }
            counters.requests.wrappingAdd(1, ordering: .relaxed)
            keepAlive = head.isKeepAlive
            let request = BackendRequest(method: head.method, uri: head.uri, headers: head.headers, body: body)
            respond(context: context, handler(request), method: head.method)
        }
    }

    private func respond(context: ChannelHandlerContext, _ response: BackendResponse, method: HTTPMethod) {
        switch response {
        case .full(let status, var headers, let body):
            headers.replaceOrAdd(name: "content-length", value: String(body.readableBytes))
            if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            if method != .HEAD { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            finish(context: context)
        case .stream(let status, var headers, let totalBytes):
            headers.replaceOrAdd(name: "content-length", value: String(totalBytes))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            streamRemaining = totalBytes
            pump(context: context)
        case .chunked(let status, let headers, let parts):
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            for part in parts { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: part)))), promise: nil) }
            finish(context: context)
        case .hang:
            break
        case .close:
            context.close(promise: nil)
        }
    }

    private func finish(context: ChannelHandlerContext) {
        let keepAlive = self.keepAlive
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }

    private func pump(context: ChannelHandlerContext) {
        let chunkSize = 32 * 1024
        while streamRemaining > 0 && context.channel.isWritable {
            let size = min(chunkSize, streamRemaining)
            streamRemaining -= size
            var chunk = context.channel.allocator.buffer(capacity: size)
            chunk.writeRepeatingByte(UInt8(ascii: "x"), count: size)
            counters.streamedBytes.wrappingAdd(size, ordering: .relaxed)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk))), promise: nil)
        }
        if streamRemaining == 0 && head != nil {
            head = nil
            finish(context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if streamRemaining > 0 { pump(context: context) }
        context.fireChannelWritabilityChanged()
    }
}
