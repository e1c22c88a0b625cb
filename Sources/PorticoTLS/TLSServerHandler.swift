import NIOCore

/// Sent up the pipeline (as a user inbound event) when the handshake completes.
public struct TLSHandshakeCompleted: Sendable {
    public let info: TLSConnectionInfo
    /// The certificate the handshake was served with, among the listener's.
    public let certificate: TLSCertificateChoice
}

/// Which of its listener's certificates a connection was served with (SNI's choice), so that a
/// request on it can be held to that choice: a request whose `Host` would have selected another
/// certificate was sent on a connection meant for another server (RFC 9110 §15.5.20's 421).
public struct TLSCertificateChoice: Sendable {
    let context: TLSContext
    /// The index in the policy's list of the listener's certificates.
    public let index: Int

    /// Whether the listener has more than one certificate (with one, every name selects it).
    public var hasAlternatives: Bool { context.certificateCount > 1 }

    /// Whether a handshake naming `host` would have been served this same certificate.
    public func isSelected(byHost host: String) -> Bool {
        !hasAlternatives || context.certificateIndex(forServerName: host) == index
    }
}

/// Asks, as a user outbound event, for the connection to be closed at once, dropping whatever is
/// still unwritten.
///
/// For a peer that stopped reading: a close_notify queued behind bytes it will never read would
/// never be written, so waiting for it only keeps the connection (and its descriptor) alive. The
/// TLS handler closes the socket without it. Below a plain-HTTP pipeline nothing handles the event
/// (the channel fails its promise as unsupported); the sender closes the channel itself
/// afterwards, and a socket's close never waits for pending writes anyway.
public struct CloseImmediatelyEvent: Sendable {
    public init() {}
}

/// Terminates TLS on an accepted connection with the system OpenSSL. It sits first in the pipeline:
/// ciphertext below, plaintext above.
///
/// Writes are held until a flush, then encrypted together: the plaintext of one flush goes out in
/// as few records as its size allows (a small response's head and body in one) and in one socket
/// write, whose completion completes each write's promise. Writes that arrive before the handshake
/// completes are held and flushed after it. Closing sends
/// close_notify first, and waits for it to be written at most `closeTimeout` (not at all when the
/// channel is not writable); a peer that closes without one is reported with
/// ``TLSError/Kind/uncleanShutdown`` rather than taken for a clean end of data.
public final class TLSServerHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    enum State {
        /// Waiting for (or in the middle of) the handshake.
        case handshaking
        case active
        /// close_notify has been queued (ours, or in answer to the peer's); the connection closes
        /// once it has been written, or when the close deadline passes, whichever comes first.
        case closing
        case closed
    }

    private let connection: TLSConnection
    /// The listener's context the connection started on (SNI may have moved it to another of its certificates).
    private let tlsContext: TLSContext
    private let handshakeTimeout: TimeAmount
    private let closeTimeout: TimeAmount
    private var state = State.handshaking
    private var pendingWrites: [(data: ByteBuffer, promise: EventLoopPromise<Void>?)] = []
    /// A flush arrived during the handshake; honour it once the handshake is done.
    private var flushPending = false
    private var handshakeTimer: Scheduled<Void>?
    private var receivedBytes = false
    /// Runs from the first wait for a close_notify (or alert) to be written; closes anyway.
    private var closeTimer: Scheduled<Void>?
    /// Close requests waiting for that write; completed when the socket closes.
    private var closeWaiters: [EventLoopPromise<Void>] = []
    /// ``closeNow(context:)`` has closed the socket (a write failing then calls it again).
    private var socketClosed = false
    /// This event loop's buffers, lent from connection to connection (set in `handlerAdded`, which
    /// runs on the loop).
    private var scratch: TLSScratchBuffers?

    /// - Parameter context: the listener's context at accept time; the connection keeps it for its
    ///   whole life, even if a certificate reload installs another.
    public init?(context: TLSContext) {
        guard let connection = TLSConnection(context: context) else { return nil }
        self.connection = connection
        self.tlsContext = context
        self.handshakeTimeout = TimeAmount(context.configuration.handshakeTimeout)
        self.closeTimeout = TimeAmount(context.configuration.closeTimeout)
    }

    /// The storage the connection's memory BIOs hold (tests watch it stay small between exchanges).
    var bufferStorage: Int { connection.bufferStorage }

    public func handlerAdded(context: ChannelHandlerContext) {
        scratch = TLSScratchBuffers.current
        if context.channel.isActive { startHandshakeTimer(context: context) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        startHandshakeTimer(context: context)
        context.fireChannelActive()
    }

    private func startHandshakeTimer(context: ChannelHandlerContext) {
        guard handshakeTimer == nil, case .handshaking = state else { return }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        handshakeTimer = context.eventLoop.scheduleTask(in: handshakeTimeout) {
            let (handler, context) = loopBound.value
            guard case .handshaking = handler.state else { return }
            handler.fail(TLSError(.handshakeTimeout), context: context)
        }
    }

    private func stopHandshakeTimer() {
        handshakeTimer?.cancel()
        handshakeTimer = nil
    }

    // MARK: Inbound

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state != .closed else { return }
        receivedBytes = true
        connection.receive(unwrapInboundIn(data))
        if case .handshaking = state {
            advanceHandshake(context: context)
        } else {
            readPlaintext(context: context)
        }
    }

    private func advanceHandshake(context: ChannelHandlerContext) {
        let step = connection.handshake()
        switch step {
        case .done:
            stopHandshakeTimer()
            state = .active
            writeCiphertext(context: context, promise: nil)
            let certificate = TLSCertificateChoice(context: tlsContext, index: tlsContext.certificateIndex(of: connection.servingContext))
            context.fireUserInboundEventTriggered(TLSHandshakeCompleted(info: connection.info, certificate: certificate))
            if flushPending {
                flushPending = false
                encryptPendingWrites(context: context)
            }
            // Application data may have arrived in the same read as the client's Finished.
            readPlaintext(context: context)
        case .wantMore:
            writeCiphertext(context: context, promise: nil)
        case .failed(let error):
            // The alert OpenSSL queued tells the client why.
            fail(error, context: context)
        case .closeNotify:
            fail(TLSError(.handshakeFailed, openSSLErrors: ["close_notify during the handshake"]), context: context)
        }
    }

    private func readPlaintext(context: ChannelHandlerContext) {
        // Plaintext is never longer than the ciphertext it came from.
        let capacity = max(connection.pendingCiphertext, 1024)
        let scratch = self.scratch
        var plaintext: ByteBuffer
        if var lent = scratch?.inbound.take() {
            lent.clear(minimumCapacity: capacity)
            plaintext = lent
        } else {
            plaintext = context.channel.allocator.buffer(capacity: capacity)
        }
        let step = connection.read(into: &plaintext)
        if let scratch { TLSScratchBuffers.keep(plaintext, in: &scratch.inbound) }
        if plaintext.readableBytes > 0, case .active = state {
            context.fireChannelRead(wrapInboundOut(plaintext))
        }
        switch step {
        case .done, .wantMore:
            // Reading can produce output too (a TLS 1.3 key update answer).
            writeCiphertext(context: context, promise: nil)
        case .closeNotify:
            // The peer is done: answer with our close_notify and close.
            guard case .active = state else {
                closeAfterWriting(context: context, promise: nil)
                return
            }
            context.fireChannelReadComplete()
            beginClosing(context: context, promise: nil)
        case .failed(let error):
            fail(error, context: context)
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        guard case .active = state else { return }
        // Once per batch of reads rather than per read: a large upload's reads reuse the storage.
        connection.trimBuffers()
        context.fireChannelReadComplete()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        stopHandshakeTimer()
        closeTimer?.cancel()
        closeTimer = nil
        let previous = state
        state = .closed
        failPendingWrites(ChannelError.ioOnClosedChannel)
        switch previous {
        case .active:
            context.fireErrorCaught(TLSError(.uncleanShutdown))
        case .handshaking where receivedBytes:
            context.fireErrorCaught(TLSError(.handshakeFailed, openSSLErrors: ["connection closed during the handshake"]))
        case .handshaking, .closing, .closed:
            break
        }
        context.fireChannelInactive()
    }

    public func channelWritabilityChanged(context: ChannelHandlerContext) {
        // A close_notify waiting behind more than the high-water mark of unread bytes will not be
        // written: stop waiting for it.
        if case .closing = state, !context.channel.isWritable { closeNow(context: context) }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Outbound

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch state {
        case .handshaking, .active:
            pendingWrites.append((unwrapOutboundIn(data), promise))
        case .closing, .closed:
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        switch state {
        case .handshaking: flushPending = true
        case .active: encryptPendingWrites(context: context)
        case .closing, .closed: break
        }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all || mode == .output else {
            context.close(mode: mode, promise: promise)
            return
        }
        switch state {
        case .active:
            beginClosing(context: context, promise: promise)
        case .handshaking:
            state = .closed
            stopHandshakeTimer()
            failPendingWrites(ChannelError.ioOnClosedChannel)
            context.close(mode: .all, promise: promise)
        case .closing:
            // Asked again while close_notify waits (a shutdown's last round): stop waiting.
            if let promise { closeWaiters.append(promise) }
            closeNow(context: context)
        case .closed:
            context.close(mode: .all, promise: promise)
        }
    }

    public func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is CloseImmediatelyEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        stopHandshakeTimer()
        state = .closed
        failPendingWrites(ChannelError.ioOnClosedChannel)
        if let promise { closeWaiters.append(promise) }
        closeNow(context: context)
    }

    /// Encrypts every held write (coalesced into as few records as their size allows) and sends the
    /// ciphertext in one socket write, whose completion completes the writes' promises.
    private func encryptPendingWrites(context: ChannelHandlerContext) {
        guard !pendingWrites.isEmpty else { return }
        // Read once: each read of the stored reference is a retain and a release.
        let scratch = self.scratch
        var plaintext = 0
        // By index: iterating copies each write, its buffer and its promise.
        for index in pendingWrites.indices { plaintext += pendingWrites[index].data.readableBytes }
        // Room for every record's framing too (a TLS 1.3 record adds 22 bytes, 1.2's GCM 29).
        let ciphertext = plaintext + (plaintext / TLSConnection.maxRecordPlaintext + 1) * 32
        // Both taken out, so that each is its storage's only holder (unless a socket still is one).
        var buffer: ByteBuffer
        if var lent = scratch?.outbound.take() {
            lent.clear(minimumCapacity: ciphertext)
            buffer = lent
        } else {
            buffer = context.channel.allocator.buffer(capacity: ciphertext)
        }
        var staging =
            scratch?.staging.take() ?? context.channel.allocator.buffer(capacity: min(plaintext, TLSConnection.maxRecordPlaintext))
        // Anything OpenSSL queued before (nothing, normally) leaves with the first record, ahead of it.
        // Mapped by a closure, not a key path, whose application per element is a call into the
        // runtime and a retain of the key path.
        let step = connection.write(pendingWrites.lazy.map { $0.data }, total: plaintext, staging: &staging, into: &buffer)
        if let scratch { TLSScratchBuffers.keep(staging, in: &scratch.staging) }
        connection.trimBuffers()
        // The first promise goes with the socket write; any others follow it.
        var promise: EventLoopPromise<Void>?
        for index in pendingWrites.indices {
            guard let next = pendingWrites[index].promise else { continue }
            if let first = promise { first.futureResult.cascade(to: next) } else { promise = next }
        }
        // Emptied before anything completes: a promise's callback may write again, re-entrantly.
        pendingWrites.removeAll(keepingCapacity: true)
        if case .failed(let error) = step {
            promise?.fail(error)
            fail(error, context: context)
            return
        }
        // Nothing sealed: whatever OpenSSL queued before (nothing, normally) still goes now.
        if buffer.readableBytes == 0 { connection.appendCiphertext(to: &buffer) }
        guard buffer.readableBytes > 0 else {
            // Only empty writes (an HTTP encoder's end of a body with a known length): nothing to
            // encrypt. A promise still goes down the pipeline with an empty buffer, so that the
            // socket completes it after the writes before it (NIO's encoder writes an empty end for
            // that very reason); completing it here could let its owner close the connection
            // while earlier bytes are still queued.
            if let scratch { TLSScratchBuffers.keep(buffer, in: &scratch.outbound) }
            if let promise {
                context.write(wrapOutboundOut(context.channel.allocator.buffer(capacity: 0)), promise: promise)
                context.flush()
            }
            return
        }
        context.write(wrapOutboundOut(buffer), promise: promise)
        // Given back before the flush: a callback it runs may flush another connection.
        if let scratch { TLSScratchBuffers.keep(buffer, in: &scratch.outbound) }
        context.flush()
    }

    /// Sends whatever OpenSSL has queued (handshake messages, alerts, close_notify) in a buffer of
    /// its own; with nothing queued, completes `promise` at once and flushes nothing.
    private func writeCiphertext(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        guard let ciphertext = connection.takeCiphertext(allocator: context.channel.allocator) else {
            promise?.succeed()
            return
        }
        context.writeAndFlush(wrapOutboundOut(ciphertext), promise: promise)
    }

    /// Sends what is held, then close_notify, then closes once that has been written.
    private func beginClosing(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        encryptPendingWrites(context: context)
        guard case .active = state else {
            context.close(mode: .all, promise: promise)
            return
        }
        state = .closing
        connection.shutdown()
        closeAfterWriting(context: context, promise: promise)
    }

    /// Writes what OpenSSL queued (close_notify, an alert) and closes once it has been written, or
    /// after `closeTimeout` if it has not been by then; at once if the channel is not writable, as
    /// the peer is evidently not reading.
    private func closeAfterWriting(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        if let promise { closeWaiters.append(promise) }
        guard context.channel.isWritable else {
            closeNow(context: context)
            return
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        writeCiphertext(context: context, promise: written)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in
            let (handler, context) = loopBound.value
            handler.closeNow(context: context)
        }
        guard closeTimer == nil else { return }  // an earlier wait's deadline stands
        closeTimer = context.eventLoop.scheduleTask(in: closeTimeout) {
            let (handler, context) = loopBound.value
            handler.closeTimer = nil
            handler.closeNow(context: context)
        }
    }

    /// Closes the socket now, completing every close request that waited. Called again once the
    /// channel is closed (a late write completion), it does nothing.
    private func closeNow(context: ChannelHandlerContext) {
        closeTimer?.cancel()
        closeTimer = nil
        let waiters = closeWaiters
        closeWaiters.removeAll()
        guard !socketClosed || !waiters.isEmpty else { return }
        socketClosed = true
        switch waiters.count {
        case 0:
            context.close(mode: .all, promise: nil)
        case 1:
            context.close(mode: .all, promise: waiters[0])
        default:
            let closed = context.eventLoop.makePromise(of: Void.self)
            closed.futureResult.whenComplete { result in
                for waiter in waiters { waiter.completeWith(result) }
            }
            context.close(mode: .all, promise: closed)
        }
    }

    /// Ends the connection after a failure: the alert OpenSSL queued (if any) goes out first.
    private func fail(_ error: TLSError, context: ChannelHandlerContext) {
        guard state != .closed else { return }
        stopHandshakeTimer()
        state = .closed
        failPendingWrites(error)
        // Alert first: the error makes the handlers above close the channel, which must not
        // overtake it.
        closeAfterWriting(context: context, promise: nil)
        context.fireErrorCaught(error)
    }

    private func failPendingWrites(_ error: any Error) {
        let writes = pendingWrites
        pendingWrites.removeAll()
        for write in writes { write.promise?.fail(error) }
    }
}
