import NIOCore
import Testing

@testable import PorticoUpstream

@Suite("An upstream connection pool's state machine")
struct UpstreamConnectionPoolStateMachineTests {
    typealias Machine = UpstreamConnectionPoolStateMachine
    typealias Action = UpstreamConnectionPoolStateMachine.Action
    typealias Lease = UpstreamConnectionPoolStateMachine.Lease

    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func machine(max: Int = 2, idle: TimeAmount = .seconds(60)) -> Machine {
        Machine(configuration: .init(maxConnections: max, idleTimeout: idle))
    }

    @Test("a request opens a connection, which comes back idle and serves the next request without a new one")
    func leaseAndReuse() {
        var pool = Self.machine()
        #expect(pool.leaseRequested(1, fresh: false) == Action(create: 1))
        #expect(pool.connectionEstablished(1, now: Self.t0) == Action(lease: Lease(connection: 1, request: 1)))
        // The first connection to go idle arms the idle timer; later ones do not touch it.
        #expect(pool.connectionReleased(1, now: Self.t0) == Action(scheduleIdleTimer: Self.t0 + .seconds(60)))
        #expect(pool.leaseRequested(2, fresh: false) == Action(lease: Lease(connection: 1, request: 2)))
        #expect(pool.connectionReleased(1, now: Self.t0 + .seconds(1)) == .none)
        #expect(pool.idleCount == 1)
    }

    @Test("beyond the cap requests wait, in order, for a connection to come back")
    func capAndQueue() {
        var pool = Self.machine(max: 2)
        #expect(pool.leaseRequested(1, fresh: false) == Action(create: 1))
        #expect(pool.leaseRequested(2, fresh: false) == Action(create: 2))
        #expect(pool.leaseRequested(3, fresh: false) == .none)
        #expect(pool.leaseRequested(4, fresh: false) == .none)
        #expect(pool.waitingCount == 4)
        #expect(pool.connectionEstablished(2, now: Self.t0) == Action(lease: Lease(connection: 2, request: 1)))
        #expect(pool.connectionEstablished(1, now: Self.t0) == Action(lease: Lease(connection: 1, request: 2)))
        #expect(pool.connectionReleased(1, now: Self.t0) == Action(lease: Lease(connection: 1, request: 3)))
        #expect(pool.connectionReleased(2, now: Self.t0) == Action(lease: Lease(connection: 2, request: 4)))
        #expect(pool.waitingCount == 0)
        #expect(pool.leasedCount == 2)
    }

    @Test("a failed connection attempt fails the oldest waiting request and another attempt starts for the rest")
    func connectFailure() {
        var pool = Self.machine(max: 1)
        #expect(pool.leaseRequested(1, fresh: false) == Action(create: 1))
        #expect(pool.leaseRequested(2, fresh: false) == .none)
        #expect(pool.connectFailed(1) == Action(create: 2, fail: 1))
        #expect(pool.connectFailed(2) == Action(fail: 2))
        #expect(pool.waitingCount == 0)
        #expect(pool.connectingCount == 0)
    }

    @Test("a request that gave up leaves the queue, and its connection goes idle")
    func cancelledWhileWaiting() {
        var pool = Self.machine()
        _ = pool.leaseRequested(1, fresh: false)
        let removed = pool.requestCancelled(1)
        let removedAgain = pool.requestCancelled(1)
        #expect(removed)
        #expect(!removedAgain)
        #expect(pool.connectionEstablished(1, now: Self.t0) == Action(scheduleIdleTimer: Self.t0 + .seconds(60)))
        #expect(pool.idleCount == 1)
    }

    @Test("idle connections close after the idle timeout, oldest first, and the timer is re-armed for the rest")
    func idleTimeout() {
        var pool = Self.machine(max: 3, idle: .seconds(10))
        _ = pool.leaseRequested(1, fresh: false)
        _ = pool.leaseRequested(2, fresh: false)
        _ = pool.connectionEstablished(1, now: Self.t0)
        _ = pool.connectionEstablished(2, now: Self.t0)
        #expect(pool.connectionReleased(1, now: Self.t0) == Action(scheduleIdleTimer: Self.t0 + .seconds(10)))
        #expect(pool.connectionReleased(2, now: Self.t0 + .seconds(4)) == .none)
        let first = pool.idleTimerFired(now: Self.t0 + .seconds(10))
        #expect(first.close == [1])
        #expect(first.next == Self.t0 + .seconds(14))
        let second = pool.idleTimerFired(now: Self.t0 + .seconds(14))
        #expect(second.close == [2])
        #expect(second.next == nil)
        #expect(pool.idleCount == 0)
        // The next connection to go idle arms the timer again.
        _ = pool.leaseRequested(3, fresh: false)
        #expect(pool.connectionEstablished(3, now: Self.t0 + .seconds(20)) == Action(lease: Lease(connection: 3, request: 3)))
        #expect(pool.connectionReleased(3, now: Self.t0 + .seconds(20)) == Action(scheduleIdleTimer: Self.t0 + .seconds(30)))
    }

    @Test("the most recently used idle connection is taken first, so spare ones age out")
    func warmestFirst() {
        var pool = Self.machine(max: 2)
        _ = pool.leaseRequested(1, fresh: false)
        _ = pool.leaseRequested(2, fresh: false)
        _ = pool.connectionEstablished(1, now: Self.t0)
        _ = pool.connectionEstablished(2, now: Self.t0)
        _ = pool.connectionReleased(2, now: Self.t0)
        _ = pool.connectionReleased(1, now: Self.t0 + .seconds(1))
        #expect(pool.leaseRequested(3, fresh: false) == Action(lease: Lease(connection: 1, request: 3)))
    }

    @Test("a request that needs a fresh connection never gets an idle one")
    func freshConnections() {
        var pool = Self.machine(max: 2)
        _ = pool.leaseRequested(1, fresh: false)
        _ = pool.connectionEstablished(1, now: Self.t0)
        _ = pool.connectionReleased(1, now: Self.t0)
        // Under the cap: a new connection is opened beside the idle one.
        #expect(pool.leaseRequested(2, fresh: true) == Action(create: 2))
        #expect(pool.connectionEstablished(2, now: Self.t0) == Action(lease: Lease(connection: 2, request: 2)))
        // At the cap: the oldest idle connection makes room.
        #expect(pool.leaseRequested(3, fresh: true) == Action(create: 3, close: 1))
        // A connection coming back is not given to a request that needs a fresh one; at the cap,
        // with nothing opening for it, it is replaced.
        var full = Self.machine(max: 1)
        _ = full.leaseRequested(1, fresh: false)
        _ = full.connectionEstablished(1, now: Self.t0)
        #expect(full.leaseRequested(2, fresh: true) == .none)
        #expect(full.connectionReleased(1, now: Self.t0) == Action(create: 2, close: 1))
        #expect(full.connectionEstablished(2, now: Self.t0) == Action(lease: Lease(connection: 2, request: 2)))
    }

    @Test("a closed connection leaves room for a waiting request")
    func closedConnections() {
        var pool = Self.machine(max: 1)
        _ = pool.leaseRequested(1, fresh: false)
        _ = pool.connectionEstablished(1, now: Self.t0)
        #expect(pool.leaseRequested(2, fresh: false) == .none)
        #expect(pool.connectionClosed(1) == Action(create: 2))
        #expect(pool.connectionClosed(1) == .none)  // told twice: the second time is ignored
        #expect(pool.connectionEstablished(2, now: Self.t0) == Action(lease: Lease(connection: 2, request: 2)))
        _ = pool.connectionReleased(2, now: Self.t0)
        #expect(pool.connectionClosed(2) == .none)
        #expect(pool.idleCount == 0)
    }

    @Test("shutting down fails the waiting requests, closes the connections and refuses new requests")
    func shutdown() {
        var pool = Self.machine(max: 2)
        _ = pool.leaseRequested(1, fresh: false)
        _ = pool.leaseRequested(2, fresh: false)
        _ = pool.leaseRequested(3, fresh: false)
        _ = pool.connectionEstablished(1, now: Self.t0)
        let stopped = pool.shutdown()
        #expect(stopped.fail == [2, 3])
        #expect(stopped.close == [1])
        #expect(pool.connectionEstablished(2, now: Self.t0) == Action(close: 2))
        #expect(pool.leaseRequested(4, fresh: false) == Action(fail: 4))
    }
}
