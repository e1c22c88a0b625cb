import NIOCore
import Testing

@testable import Portico

@Suite("Connection timeouts, without a channel")
struct ConnectionTimeoutStateMachineTests {
    /// Any instant: the machine only adds to the times it is given.
    static let start = NIODeadline.uptimeNanoseconds(5_000_000_000)

    @Test("with a minimum body rate, the body is due by the grace period plus a second per rate's worth of bytes received")
    func bodyRateDeadline() {
        var machine = ConnectionTimeoutStateMachine(minBodyRate: 100, bodyGrace: .seconds(10))
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(60, now: Self.start)
        let due = Self.start + .seconds(10)
        #expect(machine.requestHeadReceived(expectsBody: true, now: Self.start) == .startTimer(.body(notAfter: due)))
        // 50 bytes earn half a second; the deadline counts from the head, not from the bytes.
        #expect(machine.bytesReceived(50, now: Self.start + .seconds(3)) == .startTimer(.body(notAfter: due + .milliseconds(500))))
        #expect(machine.bytesReceived(1, now: Self.start + .seconds(9)) == .startTimer(.body(notAfter: due + .milliseconds(510))))
        #expect(machine.bytesReceived(1000, now: Self.start + .seconds(10)) == .startTimer(.body(notAfter: due + .milliseconds(10_510))))
        #expect(machine.timerFired() == .respondTimeoutAndClose)
    }

    @Test("a new body starts its own rate clock; draining an early answer's body does not")
    func bodyRatePerRequest() {
        var machine = ConnectionTimeoutStateMachine(minBodyRate: 100, bodyGrace: .seconds(10))
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(60, now: Self.start)
        _ = machine.requestHeadReceived(expectsBody: true, now: Self.start)
        _ = machine.bytesReceived(500, now: Self.start + .seconds(1))
        #expect(machine.requestEndReceived() == .cancelTimer)
        _ = machine.responseEndSent()
        let later = Self.start + .seconds(60)
        _ = machine.bytesReceived(60, now: later)
        #expect(machine.requestHeadReceived(expectsBody: true, now: later) == .startTimer(.body(notAfter: later + .seconds(10))))
        #expect(machine.drainStarted() == .startTimer(.head))
        #expect(machine.bytesReceived(100, now: later + .seconds(1)) == .none)
    }
    @Test("a new connection waits under the idle timer; its first byte starts the head deadline")
    func firstByte() {
        var machine = ConnectionTimeoutStateMachine()
        #expect(machine.connectionOpened() == .startTimer(.idle))
        #expect(machine.bytesReceived(1, now: Self.start) == .startTimer(.head))
        // More bytes of the same head do not push the deadline back.
        #expect(machine.bytesReceived(1, now: Self.start) == .none)
        #expect(machine.timerFired() == .respondTimeoutAndClose)
    }

    @Test("an idle keep-alive connection is closed quietly")
    func idleClose() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        #expect(machine.timerFired() == .close)
        #expect(machine.state == .closed)
    }

    @Test("each pause in a body restarts the read timer; a complete request stops it")
    func body() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(1, now: Self.start)
        #expect(machine.requestHeadReceived(expectsBody: true, now: Self.start) == .startTimer(.body(notAfter: nil)))
        #expect(machine.bytesReceived(1, now: Self.start) == .startTimer(.body(notAfter: nil)))
        #expect(machine.requestEndReceived() == .cancelTimer)
        #expect(machine.timerFired() == .none)
        #expect(machine.responseEndSent() == .startTimer(.idle))
    }

    @Test("bytes of a pipelined request seen during handling start its head deadline after the response")
    func pipelined() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(1, now: Self.start)
        #expect(machine.requestHeadReceived(expectsBody: false, now: Self.start) == .cancelTimer)
        #expect(machine.bytesReceived(1, now: Self.start) == .none)
        #expect(machine.responseEndSent() == .startTimer(.head))
        #expect(machine.requestHeadReceived(expectsBody: false, now: Self.start) == .cancelTimer)
    }

    @Test("an early answer while the body still arrives keeps the read timer running")
    func earlyAnswer() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(1, now: Self.start)
        _ = machine.requestHeadReceived(expectsBody: true, now: Self.start)
        #expect(machine.responseEndSent() == .none)
        #expect(machine.timerFired() == .respondTimeoutAndClose)
    }

    @Test("nothing fires after the connection closed")
    func closed() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        #expect(machine.connectionClosed() == .stopTimers)
        #expect(machine.timerFired() == .none)
        #expect(machine.bytesReceived(1, now: Self.start) == .none)
        #expect(machine.flushQueued() == .none)
        #expect(machine.sendTimerFired() == .none)
    }

    @Test("the first flush waiting starts the send timer; further flushes do not push it back")
    func sendTimerStarts() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(1, now: Self.start)
        _ = machine.requestHeadReceived(expectsBody: false, now: Self.start)
        #expect(machine.flushQueued() == .startTimer(.send))
        #expect(machine.flushQueued() == .none)
        #expect(machine.flushQueued() == .none)
        #expect(machine.sending == .waiting(flushes: 3))
        #expect(machine.sendTimerFired() == .closeImmediately)
        #expect(machine.state == .closed)
    }

    @Test("each completed flush is progress and restarts the send timer; the last one stops it")
    func sendProgress() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.flushQueued()
        _ = machine.flushQueued()
        #expect(machine.flushCompleted() == .startTimer(.send))
        #expect(machine.flushCompleted() == .cancelSendTimer)
        #expect(machine.sending == .caughtUp)
        // Caught up, a late expiry closes nothing.
        #expect(machine.sendTimerFired() == .none)
        #expect(machine.flushCompleted() == .none)
    }

    @Test("the channel becoming writable again is progress while flushes wait, and nothing otherwise")
    func writability() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        #expect(machine.becameWritable() == .none)
        _ = machine.flushQueued()
        #expect(machine.becameWritable() == .startTimer(.send))
    }

    @Test("the send timer is independent of the read side: an idle connection with unwritten bytes is closed at once")
    func sendTimerWhileIdle() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(1, now: Self.start)
        _ = machine.requestHeadReceived(expectsBody: false, now: Self.start)
        _ = machine.flushQueued()
        #expect(machine.responseEndSent() == .startTimer(.idle))
        #expect(machine.state == .idle)
        #expect(machine.sendTimerFired() == .closeImmediately)
        // The read timer, still scheduled in the handler, finds nothing to do.
        #expect(machine.timerFired() == .none)
    }

    @Test("a 408 that the client does not read still meets the send timer")
    func timeoutAnswerNotRead() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived(1, now: Self.start)
        #expect(machine.timerFired() == .respondTimeoutAndClose)
        #expect(machine.flushQueued() == .startTimer(.send))
        #expect(machine.sendTimerFired() == .closeImmediately)
    }
}
