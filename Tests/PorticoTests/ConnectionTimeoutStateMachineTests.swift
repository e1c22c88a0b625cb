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
        #expect(machine.connectionClosed() == .cancelTimer)
        #expect(machine.timerFired() == .none)
        #expect(machine.bytesReceived() == .none)
    }
}
