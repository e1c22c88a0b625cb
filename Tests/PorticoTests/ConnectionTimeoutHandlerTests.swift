import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import PorticoTestSupport
import Testing

@testable import Portico

/// The timeout handler on an `EmbeddedChannel`, whose clock moves only when the test says so:
/// every assertion about time is exact, however loaded the machine.
@Suite("Connection timeouts, on a virtual clock")
struct ConnectionTimeoutHandlerTests {
    struct Setup {
        let channel: EmbeddedChannel
        let socket: StuckSocket
        let handler: ConnectionTimeoutHandler

        /// Moves the virtual clock.
        func advance(_ amount: TimeAmount) { channel.embeddedEventLoop.advanceTime(by: amount) }

        /// A complete request without a body arrived: only the gateway's clock runs now.
        func requestArrived() throws {
            try channel.writeInbound(ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n"))
            handler.requestHeadReceived(expectsBody: false)
        }

        /// Text the channel wrote (what got past the stuck socket).
        func written() throws -> String {
            var text = ""
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
            return text
        }
    }

    static func setUp(
        head: TimeAmount = .seconds(10), idle: TimeAmount = .seconds(60), send: TimeAmount = .seconds(1), minBodyRate: Int = 0
    ) throws -> Setup {
        let channel = EmbeddedChannel()
        let socket = StuckSocket()
        let handler = ConnectionTimeoutHandler(headTimeout: head, idleTimeout: idle, sendTimeout: send, minBodyRate: minBodyRate)
        try channel.pipeline.syncOperations.addHandler(socket)
        try channel.pipeline.syncOperations.addHandler(handler)
        // The channel counts none of what the stand-in socket holds: the socket says it instead.
        handler.unwrittenBytesForTesting = { socket.heldBytes }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return Setup(channel: channel, socket: socket, handler: handler)
    }

    @Test("response bytes that make no progress for sendTimeout close the connection at once")
    func noProgress() throws {
        let setup = try Self.setUp()
        try setup.requestArrived()
        setup.socket.stuck = true
        setup.channel.writeAndFlush(ByteBuffer(string: "HTTP/1.1 200 OK\r\n"), promise: nil)
        setup.channel.writeAndFlush(ByteBuffer(string: "content-length: 5\r\n\r\n"), promise: nil)
        setup.advance(.milliseconds(999))
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(1))
        #expect(!setup.channel.isActive)
        // At once: the TLS handler, were there one, is told to skip close_notify.
        #expect(setup.socket.immediateCloseRequested)
        #expect(setup.socket.held.isEmpty)  // dropped with the socket
    }

    @Test("steady write progress, each step shorter than sendTimeout, keeps the connection open for as long as it lasts")
    func steadyProgress() throws {
        let setup = try Self.setUp()
        try setup.requestArrived()
        setup.socket.stuck = true
        setup.channel.writeAndFlush(ByteBuffer(string: "first"), promise: nil)
        // Twenty seconds of a slow reader: each write completes 900 ms after the last.
        for index in 0..<22 {
            setup.channel.writeAndFlush(ByteBuffer(string: "part \(index)"), promise: nil)
            setup.advance(.milliseconds(900))
            #expect(setup.channel.isActive, "closed after \(index + 1) steps")
            setup.socket.release(1)
        }
        // Then the reader stops: one more second and it is gone.
        setup.advance(.milliseconds(999))
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(1))
        #expect(!setup.channel.isActive)
    }

    @Test("a flush whose bytes wait is watched through one promise after them; the writes pass on with their writers' promises")
    func onePromisePerFlush() throws {
        let setup = try Self.setUp()
        try setup.requestArrived()
        setup.socket.stuck = true
        let own = setup.channel.eventLoop.makePromise(of: Void.self)
        setup.channel.write(ByteBuffer(string: "head "), promise: nil)
        setup.channel.write(ByteBuffer(string: "body "), promise: own)
        setup.channel.write(ByteBuffer(string: "end"), promise: nil)
        #expect(setup.socket.held.count == 2)  // the last waits for the flush
        setup.channel.flush()
        // The last write as it came, then an empty one whose promise says when all of it has left.
        #expect(setup.socket.held.map { $0.promise != nil } == [false, true, false, true])
        #expect(setup.socket.heldBytes == 13)
        setup.advance(.milliseconds(900))
        setup.socket.release()
        let completed = NIOLockedValueBox(false)
        own.futureResult.whenSuccess { completed.withLockedValue { $0 = true } }
        #expect(completed.withLockedValue { $0 })
        // Caught up: no send timer runs any more.
        setup.advance(.seconds(30))
        #expect(setup.channel.isActive)
        #expect(try setup.written() == "head body end")
    }

    @Test("a flush that leaves at once is not watched: no promise, and no send timer after it")
    func leftAtOnce() throws {
        let setup = try Self.setUp()
        try setup.requestArrived()
        setup.channel.writeAndFlush(ByteBuffer(string: "all of it"), promise: nil)
        #expect(setup.socket.promisedWrites == 0)
        // The next flush finds the socket stuck: its bytes wait, and are watched.
        setup.socket.stuck = true
        setup.channel.writeAndFlush(ByteBuffer(string: "unread"), promise: nil)
        #expect(setup.socket.promisedWrites == 1)
        setup.advance(.milliseconds(999))
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(1))
        #expect(!setup.channel.isActive)
        #expect(try setup.written() == "all of it")
    }

    @Test("a write held for its flush still goes out, in order, before a close")
    func heldWriteBeforeClose() throws {
        let setup = try Self.setUp()
        try setup.requestArrived()
        setup.socket.stuck = true  // the socket keeps what reaches it, and fails it at the close
        let written = setup.channel.eventLoop.makePromise(of: Void.self)
        setup.channel.write(ByteBuffer(string: "last words"), promise: written)
        #expect(setup.socket.held.isEmpty)
        let failed = NIOLockedValueBox(false)
        written.futureResult.whenFailure { _ in failed.withLockedValue { $0 = true } }
        setup.channel.close(promise: nil)
        #expect(setup.socket.closeRequests == 1)
        // It reached the socket before the close did, and failed with what the socket held.
        #expect(failed.withLockedValue { $0 })
    }

    @Test("the channel becoming writable again counts as progress")
    func writableIsProgress() throws {
        let setup = try Self.setUp()
        try setup.requestArrived()
        setup.socket.stuck = true
        setup.channel.writeAndFlush(ByteBuffer(repeating: 0x78, count: 100_000), promise: nil)
        setup.advance(.milliseconds(800))
        setup.channel.isWritable = true
        setup.channel.pipeline.fireChannelWritabilityChanged()
        setup.advance(.milliseconds(800))
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(200))
        #expect(!setup.channel.isActive)
    }

    @Test("nothing waiting to be written, no send timeout: a request in the gateway's hands may take its time")
    func nothingWaiting() throws {
        let setup = try Self.setUp()
        try setup.requestArrived()
        setup.channel.writeAndFlush(ByteBuffer(string: "written at once"), promise: nil)
        setup.advance(.seconds(30))
        #expect(setup.channel.isActive)
        #expect(try setup.written() == "written at once")
    }

    @Test("a keep-alive connection with unread response bytes meets the send timeout before its idle timeout")
    func idleWithUnreadBytes() throws {
        let setup = try Self.setUp(idle: .seconds(5))
        try setup.requestArrived()
        setup.socket.stuck = true
        setup.channel.writeAndFlush(ByteBuffer(string: "unread"), promise: nil)
        setup.handler.responseEndSent()
        setup.advance(.seconds(1))
        #expect(!setup.channel.isActive)
        #expect(setup.socket.immediateCloseRequested)
    }

    @Test("the idle deadline, longer than the timer's wake-up step, is neither early nor late")
    func idleDeadline() throws {
        let setup = try Self.setUp(head: .milliseconds(400), idle: .milliseconds(600), send: .seconds(60))
        setup.advance(.milliseconds(400))  // the first wake-up: too early, it sleeps again
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(199))
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(1))
        #expect(!setup.channel.isActive)
        #expect(!setup.socket.immediateCloseRequested)  // a quiet, ordinary close
    }

    @Test("the head deadline runs from the first byte: bytes every 100 ms do not push it back")
    func headDeadlineNotReset() throws {
        let setup = try Self.setUp(head: .milliseconds(400), idle: .seconds(60), send: .seconds(60))
        for byte in "GET ".utf8 {
            #expect(setup.channel.isActive)
            try setup.channel.writeInbound(ByteBuffer(bytes: [byte]))
            setup.advance(.milliseconds(100))
        }
        // 400 ms after the first byte (the fourth came at 300 ms): answered 408, closed once it was written.
        #expect(try setup.written().hasPrefix("HTTP/1.1 408 "))
        #expect(!setup.channel.isActive)
    }

    @Test("each pause in a body restarts the head timeout")
    func bodyPauses() throws {
        let setup = try Self.setUp(head: .milliseconds(400), idle: .seconds(60), send: .seconds(60))
        try setup.channel.writeInbound(ByteBuffer(string: "POST / HTTP/1.1\r\ncontent-length: 10\r\n\r\n"))
        setup.handler.requestHeadReceived(expectsBody: true)
        for _ in 0..<10 {
            setup.advance(.milliseconds(350))
            try setup.channel.writeInbound(ByteBuffer(string: "b"))
        }
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(400))
        #expect(try setup.written().hasPrefix("HTTP/1.1 408 "))
        #expect(!setup.channel.isActive)
    }

    @Test("a body dribbled a byte within every pause is cut off with 408 once it falls behind the minimum rate")
    func slowBody() throws {
        // The attack, scaled: one byte every 1.5 s, each pause inside the 10 s head timeout.
        let setup = try Self.setUp(head: .seconds(10), idle: .seconds(60), send: .seconds(60), minBodyRate: 100)
        try setup.channel.writeInbound(ByteBuffer(string: "POST / HTTP/1.1\r\ncontent-length: 1000\r\n\r\n"))
        setup.handler.requestHeadReceived(expectsBody: true)
        var sent = 0
        var elapsed = TimeAmount.zero
        while setup.channel.isActive && elapsed < .seconds(60) {
            try setup.channel.writeInbound(ByteBuffer(string: "b"))
            sent += 1
            setup.advance(.milliseconds(1500))
            elapsed = elapsed + .milliseconds(1500)
        }
        #expect(try setup.written().hasPrefix("HTTP/1.1 408 "))
        #expect(!setup.channel.isActive)
        // Cut off after the grace period and the few bytes' allowance, not at the 60 s bound.
        #expect(sent == 7)  // bytes at 0, 1.5 … 9 s; due at 10.07 s, found at the wake-up of 10.5 s
    }

    @Test("a body that keeps up with the minimum rate may take far longer than the grace period")
    func bodyAtRate() throws {
        let setup = try Self.setUp(head: .seconds(10), idle: .seconds(60), send: .seconds(60), minBodyRate: 100)
        try setup.channel.writeInbound(ByteBuffer(string: "POST / HTTP/1.1\r\ncontent-length: 6000\r\n\r\n"))
        setup.handler.requestHeadReceived(expectsBody: true)
        for _ in 0..<60 {
            setup.advance(.seconds(1))
            try setup.channel.writeInbound(ByteBuffer(repeating: UInt8(ascii: "b"), count: 100))
        }
        #expect(setup.channel.isActive)
        setup.handler.requestEndReceived()
        #expect(try setup.written().isEmpty)
    }

    @Test("a 408 the client never reads is dropped after the send timeout")
    func unreadTimeoutAnswer() throws {
        let setup = try Self.setUp(head: .milliseconds(400), idle: .seconds(60), send: .seconds(1))
        setup.socket.stuck = true
        try setup.channel.writeInbound(ByteBuffer(string: "GET /"))
        setup.advance(.milliseconds(400))
        #expect(setup.socket.held.count == 1)  // the 408, waiting
        #expect(setup.channel.isActive)
        setup.advance(.seconds(1))
        #expect(!setup.channel.isActive)
        #expect(setup.socket.immediateCloseRequested)
    }

    @Test("over TLS, the send timeout closes at once instead of waiting out the TLS close deadline")
    func overTLS() throws {
        let timeouts = ConnectionTimeoutHandler(headTimeout: .seconds(10), idleTimeout: .seconds(60), sendTimeout: .seconds(1))
        let setup = try TLSHandlerHarness.start(above: timeouts)
        let socket = setup.socket
        timeouts.unwrittenBytesForTesting = { socket.heldBytes }
        try setup.pump()
        setup.client.write("GET / HTTP/1.1\r\n\r\n")
        try setup.pump()
        timeouts.requestHeadReceived(expectsBody: false)
        setup.socket.stuck = true
        setup.channel.writeAndFlush(ByteBuffer(string: "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"), promise: nil)
        setup.advance(.milliseconds(999))
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(1))
        #expect(!setup.channel.isActive)
        #expect(!setup.socket.immediateCloseRequested)  // the TLS handler took the event and closed
        #expect(setup.recorder.errors.isEmpty)
    }
}
