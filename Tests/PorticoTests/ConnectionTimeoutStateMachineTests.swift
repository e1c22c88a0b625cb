import Testing

@testable import Portico

@Suite("Connection timeouts, without a channel")
struct ConnectionTimeoutStateMachineTests {
    @Test("a new connection waits under the idle timer; its first byte starts the head deadline")
    func firstByte() {
        var machine = ConnectionTimeoutStateMachine()
        #expect(machine.connectionOpened() == .startTimer(.idle))
        #expect(machine.bytesReceived() == .startTimer(.head))
        // More bytes of the same head do not push the deadline back.
        #expect(machine.bytesReceived() == .none)
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
        _ = machine.bytesReceived()
        #expect(machine.requestHeadReceived(expectsBody: true) == .startTimer(.head))
        #expect(machine.bytesReceived() == .startTimer(.head))
        #expect(machine.requestEndReceived() == .cancelTimer)
        #expect(machine.timerFired() == .none)
        #expect(machine.responseEndSent() == .startTimer(.idle))
    }

    @Test("bytes of a pipelined request seen during handling start its head deadline after the response")
    func pipelined() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived()
        #expect(machine.requestHeadReceived(expectsBody: false) == .cancelTimer)
        #expect(machine.bytesReceived() == .none)
        #expect(machine.responseEndSent() == .startTimer(.head))
        #expect(machine.requestHeadReceived(expectsBody: false) == .cancelTimer)
    }

    @Test("an early answer while the body still arrives keeps the read timer running")
    func earlyAnswer() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived()
        _ = machine.requestHeadReceived(expectsBody: true)
        #expect(machine.responseEndSent() == .none)
        #expect(machine.timerFired() == .respondTimeoutAndClose)
    }

    @Test("nothing fires after the connection closed")
    func closed() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        #expect(machine.connectionClosed() == .stopTimers)
        #expect(machine.timerFired() == .none)
        #expect(machine.bytesReceived() == .none)
        #expect(machine.flushQueued() == .none)
        #expect(machine.sendTimerFired() == .none)
    }

    @Test("the first flush waiting starts the send timer; further flushes do not push it back")
    func sendTimerStarts() {
        var machine = ConnectionTimeoutStateMachine()
        _ = machine.connectionOpened()
        _ = machine.bytesReceived()
        _ = machine.requestHeadReceived(expectsBody: false)
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
        _ = machine.bytesReceived()
        _ = machine.requestHeadReceived(expectsBody: false)
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
        _ = machine.bytesReceived()
        #expect(machine.timerFired() == .respondTimeoutAndClose)
        #expect(machine.flushQueued() == .startTimer(.send))
        #expect(machine.sendTimerFired() == .closeImmediately)
    }
}
