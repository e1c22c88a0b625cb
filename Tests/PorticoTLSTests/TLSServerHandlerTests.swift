import CPorticoOpenSSL
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import PorticoTestSupport
import Testing

@testable import PorticoTLS

/// The handler's state machine without sockets: an `EmbeddedChannel` on one side, an OpenSSL
/// client over memory BIOs on the other, bytes moved by hand between them.
@Suite("The TLS handler, byte by byte")
struct TLSServerHandlerTests {
    typealias Setup = TLSHandlerHarness

    /// A TLS handler (default handshake and close timeouts: 10 s and 3 s) on an embedded channel;
    /// `above` goes between it and the recorder.
    static func setUp(above: (any ChannelHandler)? = nil) throws -> Setup {
        try TLSHandlerHarness.start(above: above)
    }

    /// The content type of each TLS record in `ciphertext`, walked by the 5-byte record headers
    /// (type, version, length). Under TLS 1.3 every encrypted record says 23, application data.
    static func recordTypes(_ ciphertext: ByteBuffer) -> [UInt8] {
        var rest = ciphertext
        var types: [UInt8] = []
        while let type = rest.readInteger(as: UInt8.self) {
            rest.moveReaderIndex(forwardBy: 2)
            guard let length = rest.readInteger(as: UInt16.self), rest.readSlice(length: Int(length)) != nil else {
                types.append(0)  // a truncated record
                break
            }
            types.append(type)
        }
        return types
    }

    /// Writes `parts` with a promise each, flushes, and returns the ciphertext that reached the
    /// socket, in the socket writes it came in, and whether every promise succeeded.
    static func flushed(_ parts: [ByteBuffer], setup: Setup) throws -> (writes: [ByteBuffer], promisesSucceeded: Bool) {
        let succeeded = NIOLockedValueBox(0)
        for part in parts {
            let promise = setup.channel.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenSuccess { succeeded.withLockedValue { $0 += 1 } }
            setup.channel.write(part, promise: promise)
        }
        setup.channel.flush()
        var writes: [ByteBuffer] = []
        while let buffer = try setup.channel.readOutbound(as: ByteBuffer.self) { writes.append(buffer) }
        return (writes, succeeded.withLockedValue { $0 } == parts.count)
    }

    @Test("a small response's head, body and end, written then flushed, leave as one record in one socket write")
    func oneRecordPerSmallResponse() throws {
        let setup = try Self.setUp()
        try setup.pump()
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n"
        // The empty write is what NIO's encoder sends for the end of a body with a known length.
        let parts = [ByteBuffer(string: head), ByteBuffer(string: #"{"ok":true}"#), ByteBuffer()]
        let (writes, succeeded) = try Self.flushed(parts, setup: setup)
        #expect(writes.count == 1)
        #expect(writes.map(Self.recordTypes) == [[23]])
        #expect(succeeded)
        for buffer in writes { setup.client.give(buffer) }
        #expect(setup.client.read().text == head + #"{"ok":true}"#)
        _ = try setup.channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a flush larger than a record leaves in as few records as its size allows, in one socket write")
    func fewestRecordsForLargeFlushes() throws {
        let setup = try Self.setUp()
        try setup.pump()
        // A head, a body of two and a half records, a tail: 3 records.
        let big = [ByteBuffer(string: "HTTP/1.1 200 OK\r\n\r\n"), ByteBuffer(repeating: 0x61, count: 40_000), ByteBuffer(string: "tail")]
        // Fifty small writes, 50,000 bytes: 4 records (the pieces cross record boundaries).
        let small = (0..<50).map { ByteBuffer(repeating: UInt8(0x41 + $0 % 26), count: 1_000) }
        // One body as big as a record exactly, after a head: 2 records.
        let exact = [ByteBuffer(string: "head"), ByteBuffer(repeating: 0x62, count: 16_384)]
        for (parts, records) in [(big, 3), (small, 4), (exact, 2)] {
            let (writes, succeeded) = try Self.flushed(parts, setup: setup)
            #expect(writes.count == 1)
            #expect(writes.map(Self.recordTypes) == [Array(repeating: 23, count: records)])
            #expect(succeeded)
            for buffer in writes { setup.client.give(buffer) }
            #expect(setup.client.read().text == parts.map { String(buffer: $0) }.joined())
        }
        _ = try setup.channel.finish(acceptAlreadyClosed: true)
    }

    @Test("storage grown for a large request or response is given back once the read batch or the flush is over")
    func burstStorageGivenBack() throws {
        let setup = try Self.setUp()
        try setup.pump()
        let handler = try setup.channel.pipeline.syncOperations.handler(type: TLSServerHandler.self)
        #expect(handler.bufferStorage <= 2 * TLSConnection.keptBufferBytes)

        // 100 KB of request in one read, as a socket's batch of reads could bring it.
        setup.client.write(String(repeating: "r", count: 100_000))
        var ciphertext = ByteBuffer()
        while var bytes = setup.client.take() { ciphertext.writeBuffer(&bytes) }
        setup.channel.pipeline.syncOperations.fireChannelRead(NIOAny(ciphertext))
        #expect(setup.recorder.plaintext.count == 100_000)
        // Read, but the batch is not over: the read BIO still holds what the read needed.
        #expect(handler.bufferStorage > 100_000)
        setup.channel.pipeline.syncOperations.fireChannelReadComplete()
        #expect(handler.bufferStorage <= 2 * TLSConnection.keptBufferBytes)

        // 200 KB of response in one flush: it all arrives, and nothing grown for it stays.
        let (writes, succeeded) = try Self.flushed([ByteBuffer(repeating: 0x73, count: 200_000)], setup: setup)
        #expect(succeeded)
        for buffer in writes { setup.client.give(buffer) }
        #expect(setup.client.read().text == String(repeating: "s", count: 200_000))
        #expect(handler.bufferStorage <= 2 * TLSConnection.keptBufferBytes)
        _ = try setup.channel.finish(acceptAlreadyClosed: true)
    }

    @Test("each write's promise completes only once the flush's ciphertext has been written")
    func promisesWaitForTheSocket() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.socket.stuck = true
        let succeeded = NIOLockedValueBox(0)
        for part in ["HTTP/1.1 200 OK\r\n\r\n", "body", ""] {
            let promise = setup.channel.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenSuccess { succeeded.withLockedValue { $0 += 1 } }
            setup.channel.write(ByteBuffer(string: part), promise: promise)
        }
        setup.channel.flush()
        #expect(setup.socket.held.count == 1)
        #expect(succeeded.withLockedValue { $0 } == 0)
        setup.socket.stuck = false
        setup.socket.release()
        #expect(succeeded.withLockedValue { $0 } == 3)
        _ = try setup.channel.finish(acceptAlreadyClosed: true)
    }

    @Test("writes before the handshake are held, flushed after it, and their promises complete then")
    func writesBeforeHandshake() throws {
        let setup = try Self.setUp()
        let written = setup.channel.eventLoop.makePromise(of: Void.self)
        setup.channel.write(ByteBuffer(string: "early "), promise: nil)
        setup.channel.writeAndFlush(ByteBuffer(string: "bird"), promise: written)
        #expect(try setup.channel.readOutbound(as: ByteBuffer.self) == nil)  // nothing leaves before a ClientHello
        let completed = NIOLockedValueBox(false)
        written.futureResult.whenSuccess { completed.withLockedValue { $0 = true } }
        #expect(!completed.withLockedValue { $0 })

        try setup.pump()
        #expect(setup.recorder.events.count == 1)
        #expect(setup.recorder.events.first?.version == "TLSv1.3")
        #expect(completed.withLockedValue { $0 })
        #expect(setup.client.read().text == "early bird")
        _ = try setup.channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a write without flush stays held until the flush")
    func flushSemantics() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.channel.write(ByteBuffer(string: "held"), promise: nil)
        #expect(try setup.channel.readOutbound(as: ByteBuffer.self) == nil)
        setup.channel.flush()
        try setup.pump()
        #expect(setup.client.read().text == "held")

        setup.client.write("GET / HTTP/1.1\r\n\r\n")
        try setup.pump()
        #expect(setup.recorder.plaintext == "GET / HTTP/1.1\r\n\r\n")
        _ = try setup.channel.finish(acceptAlreadyClosed: true)
    }

    @Test("closing sends close_notify; a peer's close_notify is answered and closes cleanly")
    func closeNotify() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.channel.close(promise: nil)
        try setup.pump()
        #expect(setup.client.read().closeNotify)
        #expect(setup.recorder.errors.isEmpty)

        let other = try Self.setUp()
        try other.pump()
        other.client.write("last words")
        _ = SSL_shutdown(other.client.ssl)
        try other.pump()
        #expect(other.recorder.plaintext == "last words")  // delivered before the close
        #expect(!other.channel.isActive)
        #expect(other.recorder.errors.isEmpty)
    }

    @Test("a peer that goes away without close_notify is reported as an unclean shutdown")
    func uncleanShutdown() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.channel.pipeline.fireChannelInactive()
        #expect(setup.recorder.errors.map(\.kind) == [.uncleanShutdown])
    }

    @Test("a broken ClientHello fails the handshake with OpenSSL's reason and an alert")
    func brokenHello() throws {
        let setup = try Self.setUp()
        var garbage = ByteBuffer(bytes: [0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00])
        try setup.channel.writeInbound(garbage)
        garbage.clear()
        #expect(setup.recorder.errors.map(\.kind) == [.handshakeFailed])
        #expect(setup.recorder.errors.first?.openSSLErrors.isEmpty == false)
        let alert = try setup.channel.readOutbound(as: ByteBuffer.self)
        #expect(alert?.getInteger(at: alert!.readerIndex, as: UInt8.self) == 0x15)  // an alert record
        #expect(!setup.channel.isActive)
    }

    @Test("a handshake not finished within handshakeTimeout fails and closes, not a moment before")
    func handshakeTimeout() throws {
        let setup = try Self.setUp()
        _ = setup.client.handshake()
        try setup.channel.writeInbound(try #require(setup.client.take()))  // a ClientHello, then silence
        setup.advance(.milliseconds(9_999))
        #expect(setup.channel.isActive)
        #expect(setup.recorder.errors.isEmpty)
        setup.advance(.milliseconds(1))
        #expect(setup.recorder.errors.map(\.kind) == [.handshakeTimeout])
        #expect(!setup.channel.isActive)
    }

    @Test("a close_notify that cannot be written within the close deadline: the connection closes anyway")
    func closeDeadline() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.socket.stuck = true  // the client stops reading
        let closed = setup.channel.eventLoop.makePromise(of: Void.self)
        setup.channel.close(promise: closed)
        #expect(setup.socket.held.count == 1)  // close_notify, waiting
        setup.advance(.milliseconds(2_999))
        #expect(setup.channel.isActive)
        setup.advance(.milliseconds(1))
        #expect(!setup.channel.isActive)
        let succeeded = NIOLockedValueBox(false)
        closed.futureResult.whenSuccess { succeeded.withLockedValue { $0 = true } }
        #expect(succeeded.withLockedValue { $0 })
    }

    @Test("closing while the channel is not writable closes at once, without close_notify")
    func closeWhileNotWritable() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.channel.isWritable = false
        setup.channel.close(promise: nil)
        #expect(!setup.channel.isActive)
        #expect(try setup.channel.readOutbound(as: ByteBuffer.self) == nil)
    }

    @Test("a channel that stops being writable while close_notify waits closes at once")
    func writabilityLostWhileClosing() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.socket.stuck = true
        setup.channel.close(promise: nil)
        #expect(setup.channel.isActive)
        setup.channel.isWritable = false
        setup.channel.pipeline.fireChannelWritabilityChanged()
        #expect(!setup.channel.isActive)
    }

    @Test("a second close while close_notify waits closes at once, and completes both requests")
    func secondClose() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.socket.stuck = true
        let first = setup.channel.eventLoop.makePromise(of: Void.self)
        let second = setup.channel.eventLoop.makePromise(of: Void.self)
        setup.channel.close(promise: first)
        #expect(setup.channel.isActive)
        setup.channel.close(promise: second)
        #expect(!setup.channel.isActive)
        let completed = NIOLockedValueBox(0)
        first.futureResult.whenSuccess { completed.withLockedValue { $0 += 1 } }
        second.futureResult.whenSuccess { completed.withLockedValue { $0 += 1 } }
        #expect(completed.withLockedValue { $0 } == 2)
    }

    @Test("CloseImmediatelyEvent drops unwritten ciphertext and closes at once, without close_notify")
    func closeImmediately() throws {
        let setup = try Self.setUp()
        try setup.pump()
        setup.socket.stuck = true
        let write = setup.channel.eventLoop.makePromise(of: Void.self)
        setup.channel.writeAndFlush(ByteBuffer(string: "never read"), promise: write)
        let failed = NIOLockedValueBox(false)
        write.futureResult.whenFailure { _ in failed.withLockedValue { $0 = true } }
        setup.channel.pipeline.triggerUserOutboundEvent(CloseImmediatelyEvent(), promise: nil)
        #expect(!setup.channel.isActive)
        #expect(failed.withLockedValue { $0 })
        #expect(setup.recorder.errors.isEmpty)  // our own decision, not a peer's unclean shutdown
    }
}

/// The TLS handler's promise order (found in review).
@Suite struct TLSPromiseOrderTests {
    /// A flush of only empty writes (NIO's `.end` for a body with a known length) completes its
    /// promise after the flushes before it have reached the socket, not at once.
    @Test func anEmptyEndCompletesOnlyAfterTheBytesBeforeIt() throws {
        let setup = try TLSHandlerHarness.start()
        try setup.pump()
        setup.socket.stuck = true
        let order = NIOLockedValueBox<[String]>([])
        let body = setup.channel.eventLoop.makePromise(of: Void.self)
        body.futureResult.whenSuccess { order.withLockedValue { $0.append("body") } }
        setup.channel.writeAndFlush(ByteBuffer(string: "the last body bytes"), promise: body)
        let end = setup.channel.eventLoop.makePromise(of: Void.self)
        end.futureResult.whenSuccess { order.withLockedValue { $0.append("end") } }
        setup.channel.writeAndFlush(ByteBuffer(), promise: end)
        setup.socket.stuck = false
        setup.socket.release()
        #expect(order.withLockedValue { $0 } == ["body", "end"])
        _ = try setup.channel.finish(acceptAlreadyClosed: true)
    }
}
