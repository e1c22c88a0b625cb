import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The ``UpstreamClient`` for `http://` backends: HTTP/1.1 over SwiftNIO, on the event loop of the
/// client connection that asked.
///
/// Each event loop has its own connection pool per backend origin, and upstream connections are
/// opened on the loop that calls ``execute(_:eventLoop:handler:)``. A proxied request therefore
/// stays on one thread from the client's bytes to the backend's answer: no lock, no hop, no
/// wake-up of another thread (the libcurl client costs two hand-offs per request). `https://`
/// backends go through ``CurlUpstreamClient``; ``RoutingUpstreamClient`` picks per request. Design
/// and reasons: `docs/upstream.md`.
///
/// **Finding a loop's pools without a lock.** NIO offers no public storage per event loop, and a
/// thread-local would tie pools to threads rather than loops. Instead the client makes one
/// ``UpstreamLoopPools`` per loop of its group up front and keeps them in a dictionary that is never
/// written after `init`, so every loop reads it concurrently without synchronisation, and each
/// entry is then touched only by its own loop. A loop from outside the group (a caller's own
/// group) is served too, from a second table behind a lock: correct, not the fast path.
public final class NIOUpstreamClient: UpstreamClient {
    public struct Configuration: Sendable {
        /// Connections to one backend origin from one event loop, idle ones included; further
        /// requests wait in a FIFO queue of that loop, and the wait counts toward their timeout.
        public var maxConnectionsPerHost: Int
        /// How long an idle keep-alive connection is kept for reuse.
        public var idleTimeout: Duration
        /// Body bytes delivered but not yet consumed at which a connection stops reading.
        public var highWatermark: Int
        /// Unconsumed bytes at or under which a paused connection reads again.
        public var lowWatermark: Int

        public init(
            maxConnectionsPerHost: Int = 64, idleTimeout: Duration = .seconds(60), highWatermark: Int = 256 * 1024,
            lowWatermark: Int = 64 * 1024
        ) {
            self.maxConnectionsPerHost = max(1, maxConnectionsPerHost)
            self.idleTimeout = idleTimeout
            self.highWatermark = highWatermark
            self.lowWatermark = min(lowWatermark, highWatermark - 1)
        }
    }

    let configuration: Configuration
    /// One entry per loop of the group, written only in `init`.
    private let loops: [ObjectIdentifier: UpstreamLoopPools]
    /// Loops outside the group, added on first use.
    private let otherLoops = NIOLockedValueBox<[ObjectIdentifier: UpstreamLoopPools]>([:])
    private let isShutDown = Atomic<Bool>(false)

    /// - Parameter group: the event loops that will call ``execute(_:eventLoop:handler:)`` (the
    ///   gateway's group).
    public init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, configuration: Configuration = .init()) {
        self.configuration = configuration
        var loops: [ObjectIdentifier: UpstreamLoopPools] = [:]
        for loop in group.makeIterator() {
            loops[ObjectIdentifier(loop)] = UpstreamLoopPools(eventLoop: loop, configuration: configuration)
        }
        self.loops = loops
    }

    public func execute(
        _ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler
    ) -> any UpstreamTask {
        let target: UpstreamOrigin.Parsed
        switch UpstreamOrigin.parse(request.url) {
        case .success(let parsed): target = parsed
        case .failure(let error): return Self.failed(error, eventLoop: eventLoop, handler: handler)
        }
        guard let (head, keepAlive) = request.http1Head(for: target) else {
            return Self.failed(.unsendableRequest, eventLoop: eventLoop, handler: handler)
        }
        let exchange = UpstreamExchange(
            eventLoop: eventLoop, origin: target.origin, method: request.method, head: head, body: request.body, keepAlive: keepAlive,
            timeout: request.timeout, connectTimeout: request.connectTimeout, eventIdleTimeout: request.eventIdleTimeout, handler: handler)
        if eventLoop.inEventLoop {
            start(exchange)
        } else {
            eventLoop.execute { self.start(exchange) }
        }
        return exchange
    }

    /// Closes every pooled connection and fails waiting and running exchanges with `.shutdown`, on
    /// each loop (asynchronously: this may be called from any thread, an event loop included).
    /// Later requests fail with `.shutdown` as well.
    public func shutdown() {
        guard !isShutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let all = Array(loops.values) + otherLoops.withLockedValue { Array($0.values) }
        for pools in all {
            pools.eventLoop.execute { pools.shutdown() }
        }
    }

    /// Connection counts of the pool for `url`'s origin on `eventLoop`; call on that loop.
    func statistics(for url: String, on eventLoop: any EventLoop) -> (idle: Int, leased: Int, connecting: Int, waiting: Int)? {
        guard case .success(let target) = UpstreamOrigin.parse(url) else { return nil }
        return pools(for: eventLoop).statistics(for: target.origin)
    }

    // MARK: On the event loop

    private func start(_ exchange: UpstreamExchange) {
        let pools = pools(for: exchange.eventLoop)
        guard !pools.isShutDown, !isShutDown.load(ordering: .relaxed) else {
            exchange.failSoon(UpstreamError(.shutdown, detail: "upstream client shut down"))
            return
        }
        guard pools.canConnect else {
            exchange.failSoon(UpstreamError(.invalidRequest, detail: "the NIO client needs an event loop of NIOPosix"))
            return
        }
        exchange.start(in: pools.pool(for: exchange.origin))
    }

    private func pools(for eventLoop: any EventLoop) -> UpstreamLoopPools {
        let key = ObjectIdentifier(eventLoop)
        if let pools = loops[key] { return pools }
        return otherLoops.withLockedValue { table in
            if let pools = table[key] { return pools }
            let pools = UpstreamLoopPools(eventLoop: eventLoop, configuration: configuration)
            table[key] = pools
            if isShutDown.load(ordering: .acquiring) { eventLoop.execute { pools.shutdown() } }
            return pools
        }
    }

    /// A task for a request that cannot start; its failure arrives on the next loop turn.
    private static func failed(_ error: UpstreamError, eventLoop: any EventLoop, handler: any UpstreamResponseHandler) -> any UpstreamTask {
        let exchange = UpstreamExchange(
            eventLoop: eventLoop, origin: UpstreamOrigin(host: "", port: 0), method: "GET", head: ByteBuffer(), body: nil, keepAlive: false,
            timeout: .seconds(1), connectTimeout: .seconds(1), handler: handler)
        exchange.failSoon(error)
        return exchange
    }
}
