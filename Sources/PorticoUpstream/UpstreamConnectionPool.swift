import NIOCore
import NIOPosix

/// The HTTP/1.1 connections to one backend origin opened from one event loop, and the requests of
/// that loop waiting for them.
///
/// Confined to its event loop: every method runs there (the exchanges and connections that call it
/// live there too), so it needs no lock. Its decisions come from an
/// ``UpstreamConnectionPoolStateMachine``; this class opens, hands over and closes connections as
/// told. Connections are opened with `ClientBootstrap(group: eventLoop)`, so each lives on the
/// same thread as the client connections it serves.
final class UpstreamConnectionPool: NIOScheduledCallbackHandler {
    let origin: UpstreamOrigin
    let eventLoop: any EventLoop
    private let configuration: NIOUpstreamClient.Configuration
    private var machine: UpstreamConnectionPoolStateMachine
    private var connections: [Int: UpstreamConnectionHandler] = [:]
    /// Requests waiting for a connection, by their pool number.
    private var waiters: [Int: UpstreamExchange] = [:]
    private var nextRequestID = 0
    private var idleTimer: NIOScheduledCallback?
    /// The whole-exchange deadlines of this pool's requests, behind one timer.
    let deadlines: UpstreamDeadlines
    /// The origin as a socket address when its host is an IP literal (no resolver needed).
    private let address: SocketAddress?
    /// The connect timeout of the latest request, used for the connections opened for it.
    private var connectTimeout = TimeAmount.seconds(2)

    init(origin: UpstreamOrigin, eventLoop: any EventLoop, configuration: NIOUpstreamClient.Configuration) {
        self.origin = origin
        self.eventLoop = eventLoop
        self.configuration = configuration
        self.machine = UpstreamConnectionPoolStateMachine(
            configuration: .init(
                maxConnections: configuration.maxConnectionsPerHost, idleTimeout: TimeAmount(configuration.idleTimeout)))
        self.address = try? SocketAddress(ipAddress: origin.host, port: origin.port)
        self.deadlines = UpstreamDeadlines(eventLoop: eventLoop)
    }

    /// Counts for tests and diagnostics.
    var statistics: (idle: Int, leased: Int, connecting: Int, waiting: Int) {
        (machine.idleCount, machine.leasedCount, machine.connectingCount, machine.waitingCount)
    }

    // MARK: Requests

    /// Finds `exchange` a connection: at once when one is idle, otherwise when one opens or comes back.
    func lease(_ exchange: UpstreamExchange, fresh: Bool) {
        nextRequestID += 1
        let request = nextRequestID
        exchange.poolRequestID = request
        connectTimeout = exchange.connectTimeout
        var action = machine.leaseRequested(request, fresh: fresh)
        if let lease = action.lease, lease.request == request, let connection = connections[lease.connection] {
            // The common case: an idle connection, no queue.
            action.lease = nil
            perform(action)
            hand(connection, to: exchange)
            return
        }
        waiters[request] = exchange
        perform(action)
    }

    /// A waiting request gave up (cancelled or timed out).
    func remove(_ exchange: UpstreamExchange) {
        guard waiters.removeValue(forKey: exchange.poolRequestID) != nil else { return }
        _ = machine.requestCancelled(exchange.poolRequestID)
    }

    // MARK: Connections

    func connectionReleased(_ connection: UpstreamConnectionHandler) {
        perform(machine.connectionReleased(connection.id, now: eventLoop.now))
    }

    func connectionClosed(_ connection: UpstreamConnectionHandler) {
        connections[connection.id] = nil
        perform(machine.connectionClosed(connection.id))
    }

    /// Closes every connection and fails every request of this pool with `.shutdown`.
    func shutdown() {
        idleTimer?.cancel()
        idleTimer = nil
        let (failing, closing) = machine.shutdown()
        let error = UpstreamError(.shutdown, detail: "upstream client shut down")
        for request in failing { waiters.removeValue(forKey: request)?.failWaiting(error) }
        for id in closing {
            guard let connection = connections.removeValue(forKey: id) else { continue }
            connection.shutdown()
        }
    }

    // MARK: Idle timer

    func handleScheduledCallback(eventLoop: some EventLoop) {
        idleTimer = nil
        let (expired, next) = machine.idleTimerFired(now: self.eventLoop.now)
        for id in expired { connections.removeValue(forKey: id)?.closeFromPool() }
        if let next { idleTimer = try? self.eventLoop.assumeIsolated().scheduleCallback(at: next, handler: self) }
    }

    // MARK: Performing actions

    private func perform(_ action: UpstreamConnectionPoolStateMachine.Action, failure: UpstreamError? = nil) {
        if let id = action.close { connections.removeValue(forKey: id)?.closeFromPool() }
        if let request = action.fail {
            let error = failure ?? UpstreamError(.shutdown, detail: "upstream client shut down")
            waiters.removeValue(forKey: request)?.failWaiting(error)
        }
        if let deadline = action.scheduleIdleTimer {
            idleTimer = try? eventLoop.assumeIsolated().scheduleCallback(at: deadline, handler: self)
        }
        if let id = action.create { open(id) }
        if let lease = action.lease {
            // Neither guard can fail (connections and waiters leave these tables together with the
            // state machine's); if one did, the connection or the request is kept, not lost.
            guard let exchange = waiters.removeValue(forKey: lease.request) else {
                perform(machine.connectionReleased(lease.connection, now: eventLoop.now))
                return
            }
            guard let connection = connections[lease.connection] else {
                perform(machine.connectionClosed(lease.connection))
                self.lease(exchange, fresh: exchange.needsFreshConnection)
                return
            }
            hand(connection, to: exchange)
        }
    }

    private func hand(_ connection: UpstreamConnectionHandler, to exchange: UpstreamExchange) {
        guard case .waiting = exchange.state else {
            // The request went away meanwhile: the connection is still good.
            perform(machine.connectionReleased(connection.id, now: eventLoop.now))
            return
        }
        if !exchange.run(on: connection) {
            // The connection closed while pooled (and is forgotten by now): try again.
            if case .waiting = exchange.state { lease(exchange, fresh: exchange.needsFreshConnection) }
        }
    }

    // MARK: Opening connections

    private func open(_ id: Int) {
        let handler = UpstreamConnectionHandler(
            id: id, pool: self, highWatermark: configuration.highWatermark, lowWatermark: configuration.lowWatermark)
        guard let bootstrap = ClientBootstrap(validatingGroup: eventLoop) else {
            // `NIOUpstreamClient` refuses such loops before they reach a pool; answer later all the same.
            let error = UpstreamError(.invalidRequest, detail: "the NIO client needs an event loop of NIOPosix")
            eventLoop.assumeIsolated().execute { self.connectFailed(id, error) }
            return
        }
        let bound = NIOLoopBound(handler, eventLoop: eventLoop)
        let connecting =
            bootstrap
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.autoRead, value: false)
            // Bounds what one read batch can deliver past the high watermark (4 reads of at most 64 KiB).
            .channelOption(.maxMessagesPerRead, value: 4)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // The connection's only handler: it writes each request head as bytes and reads
                    // the responses itself (``HTTP1ResponseDecoder``), so no part crosses another
                    // context. The head was checked as it was made (``UpstreamRequest/http1Head(for:)``).
                    try channel.pipeline.syncOperations.addHandler(bound.value)
                }
            }
        let future = address.map { connecting.connect(to: $0) } ?? connecting.connect(host: origin.host, port: origin.port)
        future.assumeIsolated().whenComplete { [self] result in
            switch result {
            case .success(let channel):
                connections[id] = handler
                guard channel.isActive else {
                    connectionClosed(handler)
                    return
                }
                perform(machine.connectionEstablished(id, now: eventLoop.now))
            case .failure(let error):
                connectFailed(id, Self.connectError(error, origin: origin))
            }
        }
    }

    private func connectFailed(_ id: Int, _ error: UpstreamError) {
        perform(machine.connectFailed(id), failure: error)
    }

    /// A connect timeout is `.timedOut` (as with curl); refused, unreachable or unresolvable is
    /// `.connectFailed`.
    static func connectError(_ error: any Error, origin: UpstreamOrigin) -> UpstreamError {
        if case ChannelError.connectTimeout = error {
            return UpstreamError(.timedOut, detail: "no connection to \(origin) within the connect timeout")
        }
        return UpstreamError(.connectFailed, detail: "cannot connect to \(origin): \(error)")
    }
}
