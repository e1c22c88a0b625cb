import NIOCore

/// The decisions of one connection pool (one backend origin on one event loop), without I/O.
///
/// ``UpstreamConnectionPool`` reports what happened (a request wants a connection, a connection
/// opened, failed, came back or closed, the idle timer fired) and performs the returned ``Action``.
/// Connections and requests are plain numbers here, so the rules can be tested without sockets
/// and with made-up clocks:
///
/// - A request takes the most recently used idle connection (the warmest; the others age out).
/// - Without one, it waits in a FIFO queue, and a connection is opened for it when fewer are on
///   their way than requests wait and the pool is under its cap. Requests never take a connection
///   out of turn, and the wait counts toward their own timeout (the exchange keeps that clock).
/// - A failed connection attempt fails the oldest waiting request (each attempt answers for one
///   request, so a dead backend fails requests as fast as it refuses connections).
/// - A request that asks for a **fresh** connection (a retry after a reused one broke) is never
///   given an idle one: the idle ones are likely as stale as the one that broke.
/// - Idle connections are closed after the idle timeout by one timer per pool, armed when the
///   first connection goes idle and re-armed for the oldest one left, so the hot path (lease and
///   release) never schedules or cancels a timer.
struct UpstreamConnectionPoolStateMachine {
    struct Configuration: Sendable {
        /// Connections open or opening at once, idle ones included.
        var maxConnections: Int
        var idleTimeout: TimeAmount
    }

    enum ConnectionState: Equatable {
        case connecting
        case leased
        case idle(since: NIODeadline)
    }

    struct Lease: Equatable {
        var connection: Int
        var request: Int
    }

    /// What to do after an event; several parts may be set at once, and each names one item.
    struct Action: Equatable {
        /// Run this request on this connection now.
        var lease: Lease?
        /// Open a connection with this id.
        var create: Int?
        /// Close this connection (it is already forgotten here).
        var close: Int?
        /// This waiting request failed: its connection attempt did not succeed, or the pool is shut down.
        var fail: Int?
        /// Arm the idle timer for this time (no timer is armed now).
        var scheduleIdleTimer: NIODeadline?

        static let none = Action()
    }

    private struct Waiter {
        var request: Int
        var fresh: Bool
    }

    let configuration: Configuration
    private var connections: [Int: ConnectionState] = [:]
    /// Idle connections, least recently used first; their idle times only grow along the array.
    private var idle: [Int] = []
    private var waiting = CircularBuffer<Waiter>()
    private(set) var connectingCount = 0
    private var nextConnectionID = 0
    private var idleTimerArmed = false
    private(set) var isShutDown = false

    init(configuration: Configuration) {
        precondition(configuration.maxConnections > 0, "a pool needs room for one connection")
        self.configuration = configuration
    }

    var idleCount: Int { idle.count }
    var waitingCount: Int { waiting.count }
    var leasedCount: Int { connections.count - idle.count - connectingCount }
    func state(of connection: Int) -> ConnectionState? { connections[connection] }

    // MARK: Events

    /// A request wants a connection. `fresh`: not an idle one (see the type's notes).
    mutating func leaseRequested(_ request: Int, fresh: Bool) -> Action {
        if isShutDown { return Action(fail: request) }
        if !fresh, let connection = idle.popLast() {
            connections[connection] = .leased
            return Action(lease: Lease(connection: connection, request: request))
        }
        var action = Action()
        waiting.append(Waiter(request: request, fresh: fresh))
        if fresh, connections.count >= configuration.maxConnections, !idle.isEmpty, waiting.count > connectingCount {
            // Make room for the fresh connection by dropping the oldest idle one.
            let connection = idle.removeFirst()
            connections[connection] = nil
            action.close = connection
        }
        action.create = connectionToOpen()
        return action
    }

    /// A waiting request went away (cancelled, timed out). Returns whether it was waiting.
    mutating func requestCancelled(_ request: Int) -> Bool {
        guard let index = waiting.firstIndex(where: { $0.request == request }) else { return false }
        waiting.remove(at: index)
        return true
    }

    mutating func connectionEstablished(_ connection: Int, now: NIODeadline) -> Action {
        guard connections[connection] == .connecting else { return .none }
        connectingCount -= 1
        if isShutDown {
            connections[connection] = nil
            return Action(close: connection)
        }
        if let waiter = waiting.popFirst() {
            connections[connection] = .leased
            return Action(lease: Lease(connection: connection, request: waiter.request))
        }
        return park(connection, now: now)
    }

    mutating func connectFailed(_ connection: Int) -> Action {
        guard connections[connection] == .connecting else { return .none }
        connections[connection] = nil
        connectingCount -= 1
        var action = Action()
        action.fail = waiting.popFirst()?.request
        action.create = connectionToOpen()
        return action
    }

    /// A leased connection finished its exchange and may be reused.
    mutating func connectionReleased(_ connection: Int, now: NIODeadline) -> Action {
        guard connections[connection] == .leased else { return .none }
        if isShutDown {
            connections[connection] = nil
            return Action(close: connection)
        }
        if let index = waiting.firstIndex(where: { !$0.fresh }) {
            let waiter = waiting.remove(at: index)
            return Action(lease: Lease(connection: connection, request: waiter.request))
        }
        if !waiting.isEmpty && waiting.count > connectingCount && connections.count >= configuration.maxConnections {
            // Only requests that need a fresh connection wait, and none is on its way: replace this one.
            connections[connection] = nil
            var action = Action(close: connection)
            action.create = connectionToOpen()
            return action
        }
        return park(connection, now: now)
    }

    /// A connection closed (the backend closed it, it broke, or its exchange did not allow reuse).
    mutating func connectionClosed(_ connection: Int) -> Action {
        switch connections.removeValue(forKey: connection) {
        case nil:
            return .none
        case .connecting:
            connectingCount -= 1
        case .idle:
            idle.removeAll { $0 == connection }
        case .leased:
            break
        }
        return Action(create: connectionToOpen())
    }

    /// Closes the connections idle for the idle timeout or longer; returns them and when to look again.
    mutating func idleTimerFired(now: NIODeadline) -> (close: [Int], next: NIODeadline?) {
        idleTimerArmed = false
        var expired: [Int] = []
        while let first = idle.first, case .idle(let since) = connections[first], since + configuration.idleTimeout <= now {
            idle.removeFirst()
            connections[first] = nil
            expired.append(first)
        }
        guard let first = idle.first, case .idle(let since) = connections[first] else { return (expired, nil) }
        idleTimerArmed = true
        return (expired, since + configuration.idleTimeout)
    }

    /// Stops the pool: returns every waiting request (to fail) and every open connection (to close,
    /// failing its exchange). Connections still opening are closed when they open.
    mutating func shutdown() -> (fail: [Int], close: [Int]) {
        isShutDown = true
        let failing = waiting.map(\.request)
        waiting.removeAll()
        var closing: [Int] = []
        for (connection, state) in connections where state != .connecting {
            closing.append(connection)
            connections[connection] = nil
        }
        idle.removeAll()
        return (failing, closing.sorted())
    }

    // MARK: Helpers

    private mutating func park(_ connection: Int, now: NIODeadline) -> Action {
        connections[connection] = .idle(since: now)
        idle.append(connection)
        guard !idleTimerArmed else { return .none }
        idleTimerArmed = true
        return Action(scheduleIdleTimer: now + configuration.idleTimeout)
    }

    /// The id of a connection to open, when more requests wait than connections are opening and
    /// the pool has room.
    private mutating func connectionToOpen() -> Int? {
        guard !isShutDown, waiting.count > connectingCount, connections.count < configuration.maxConnections else { return nil }
        nextConnectionID += 1
        connections[nextConnectionID] = .connecting
        connectingCount += 1
        return nextConnectionID
    }
}
