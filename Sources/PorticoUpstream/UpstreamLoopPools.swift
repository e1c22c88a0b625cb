import NIOCore
import NIOPosix

/// Every connection pool of one event loop, one per backend origin.
///
/// `@unchecked Sendable` so that ``NIOUpstreamClient`` can keep one per loop in a table that any
/// thread reads; everything mutable is touched on `eventLoop` only (the client calls in only from
/// there, and hops there to shut down).
final class UpstreamLoopPools: @unchecked Sendable {
    let eventLoop: any EventLoop
    /// Whether this loop can open NIOPosix sockets (an embedded or foreign loop cannot).
    let canConnect: Bool
    private let configuration: NIOUpstreamClient.Configuration
    private var pools: [UpstreamOrigin: UpstreamConnectionPool] = [:]
    private(set) var isShutDown = false

    init(eventLoop: any EventLoop, configuration: NIOUpstreamClient.Configuration) {
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.canConnect = ClientBootstrap(validatingGroup: eventLoop) != nil
    }

    /// The pool for `origin`, made on first use. Pools are kept for the life of the client: an
    /// unused one holds no connections once its idle timer has run, only a few bytes.
    func pool(for origin: UpstreamOrigin) -> UpstreamConnectionPool {
        eventLoop.assertInEventLoop()
        if let pool = pools[origin] { return pool }
        let pool = UpstreamConnectionPool(origin: origin, eventLoop: eventLoop, configuration: configuration)
        pools[origin] = pool
        return pool
    }

    /// Closes every pool's connections and fails their requests; later requests fail at once.
    func shutdown() {
        eventLoop.assertInEventLoop()
        guard !isShutDown else { return }
        isShutDown = true
        for pool in pools.values { pool.shutdown() }
    }

    /// Counts of one origin's pool, for tests.
    func statistics(for origin: UpstreamOrigin) -> (idle: Int, leased: Int, connecting: Int, waiting: Int)? {
        eventLoop.assertInEventLoop()
        return pools[origin]?.statistics
    }
}
