import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A backend that counts requests and holds every answer until the test calls ``release()``: the
/// requests a client sends meanwhile are all in flight at once, which is what deduplication of
/// requests in flight needs to be shown (a quick backend would let them run one after another).
public final class HeldBackend: Sendable {
    public let port: Int
    private let channel: any Channel
    private let state: Mutex<State>

    public struct State {
        public var requests = 0
        public var held: [@Sendable () -> Void] = []
        public var released = false
    }

    /// Requests received so far, answered or held.
    public var requestsReceived: Int { state.withLock { $0.requests } }

    private init(port: Int, channel: any Channel) {
        self.port = port
        self.channel = channel
        self.state = Mutex(State())
    }

    /// Starts it on loopback; every request gets `200` with `body` (JSON) and `headers` once released.
    public static func start(body: String, headers: [(String, String)] = []) async throws -> HeldBackend {
        let backend = Box()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(
                        Handler(body: body, headers: headers, arrived: { answer in backend.value?.arrived(answer) }))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let held = HeldBackend(port: channel.localAddress!.port!, channel: channel)
        backend.value = held
        return held
    }

    /// Answers every held request, and from now on answers at once.
    public func release() {
        let held = state.withLock { state in
            state.released = true
            defer { state.held = [] }
            return state.held
        }
        for answer in held { answer() }
    }

    public func shutdown() async throws { try await channel.close() }

    private func arrived(_ answer: @escaping @Sendable () -> Void) {
        let now = state.withLock { state in
            state.requests += 1
            if !state.released { state.held.append(answer) }
            return state.released
        }
        if now { answer() }
    }

    private final class Box: Sendable {
        public let held = Mutex<HeldBackend?>(nil)
        public var value: HeldBackend? {
            get { held.withLock { $0 } }
            set { held.withLock { $0 = newValue } }
        }
    }

    private final class Handler: ChannelInboundHandler {
        public typealias InboundIn = HTTPServerRequestPart
        public typealias OutboundOut = HTTPServerResponsePart

        public let body: String
        public let headers: [(String, String)]
        public let arrived: @Sendable (@escaping @Sendable () -> Void) -> Void

        public init(body: String, headers: [(String, String)], arrived: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) {
            self.body = body
            self.headers = headers
            self.arrived = arrived
        }

        public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let body = self.body
            let extra = self.headers
            arrived {
                bound.eventLoop.execute {
                    let context = bound.value
                    var headers = HTTPHeaders()
                    headers.add(name: "content-type", value: "application/json")
                    headers.add(name: "content-length", value: String(body.utf8.count))
                    for (name, value) in extra { headers.add(name: name, value: value) }
                    context.write(
                        NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
                        promise: nil)
                    context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
                    context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
                }
            }
        }
    }
}
