import NIOCore

/// The client side of TLS on a NIO channel, over OpenSSL through ``TLSConnection`` (memory BIOs),
/// for the gateway's own outbound connections (fleet mode's `rediss://`).
///
/// The handshake starts when the channel becomes active. Writes made before it completes wait
/// here, in order, and go out encrypted once it has (a flush meanwhile is remembered), so the
/// handler above can write its first commands as soon as the channel is connected. A handshake that
/// fails (a certificate that does not verify, a name it does not match, no shared version) fails
/// the waiting writes, fires a ``TLSError`` naming OpenSSL's reason, and closes the channel.
///
/// States: idle → handshaking → active → closed.
public final class TLSClientHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private enum State {
        case idle
        case handshaking
        case active
        case closed
    }

    private var state = State.idle
    private let connection: TLSConnection
    private var pending: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var flushPending = false

    /// - Parameters:
    ///   - context: the CAs to trust, TLS 1.2 at least.
    ///   - serverName: the host connected to: sent as SNI (a DNS name) and required of the server's
    ///     certificate (a DNS name or an IP address).
    public init(context: TLSClientContext, serverName: String) throws(TLSError) {
        guard let connection = TLSConnection(client: context, serverName: serverName) else { throw TLSError.setupFailed }
        self.connection = connection
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startHandshake(context: context) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        startHandshake(context: context)
        context.fireChannelActive()
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard state == .handshaking || state == .active else { return }
        connection.receive(unwrapInboundIn(data))
        if state == .handshaking {
            advanceHandshake(context: context)
        } else {
            readPlaintext(context: context)
        }
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        // A pooled connection idles between exchanges: it keeps no storage grown for a large one.
        connection.trimBuffers()
        context.fireChannelReadComplete()
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapOutboundIn(data)
        switch state {
        case .idle, .handshaking: pending.append((buffer, promise))
        case .active: encrypt(buffer, promise: promise, context: context)
        case .closed: promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        guard state == .active else {
            flushPending = true
            return
        }
        connection.trimBuffers()
        context.flush()
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all {
            if state == .active {
                connection.shutdown()
                writeCiphertext(context: context, flush: true)
            }
            state = .closed
            failPending(ChannelError.ioOnClosedChannel)
        }
        context.close(mode: mode, promise: promise)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        let wasHandshaking = state == .handshaking
        state = .closed
        let error = TLSError(.handshakeFailed, openSSLErrors: ["the server closed the connection during the handshake"])
        failPending(wasHandshaking ? error : ChannelError.ioOnClosedChannel)
        if wasHandshaking { context.fireErrorCaught(error) }
        context.fireChannelInactive()
    }

    private func startHandshake(context: ChannelHandlerContext) {
        guard state == .idle else { return }
        state = .handshaking
        advanceHandshake(context: context)
    }

    private func advanceHandshake(context: ChannelHandlerContext) {
        switch connection.handshake() {
        case .done:
            state = .active
            writeCiphertext(context: context, flush: false)
            let writes = pending
            pending = []
            for (buffer, promise) in writes { encrypt(buffer, promise: promise, context: context) }
            flushPending = false
            context.flush()
            // Application data that arrived with the server's last handshake flight.
            readPlaintext(context: context)
        case .wantMore:
            writeCiphertext(context: context, flush: true)
        case .closeNotify:
            fail(TLSError(.handshakeFailed, openSSLErrors: ["the server closed the connection during the handshake"]), context: context)
        case .failed(let error):
            // The alert OpenSSL queued tells the server why.
            writeCiphertext(context: context, flush: true)
            if let reason = connection.verificationFailure {
                fail(TLSError(.handshakeFailed, openSSLErrors: ["server certificate: \(reason)"] + error.openSSLErrors), context: context)
            } else {
                fail(error, context: context)
            }
        }
    }

    private func readPlaintext(context: ChannelHandlerContext) {
        var plaintext = context.channel.allocator.buffer(capacity: 0)
        let step = connection.read(into: &plaintext)
        if plaintext.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(plaintext)) }
        switch step {
        case .done, .wantMore:
            // A TLS 1.3 key update may need an answer.
            writeCiphertext(context: context, flush: true)
        case .closeNotify:
            state = .closed
            context.close(promise: nil)
        case .failed(let error):
            fail(error, context: context)
        }
    }

    private func encrypt(_ buffer: ByteBuffer, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        guard case .done = connection.write(buffer) else {
            promise?.fail(TLSError(.protocolError))
            fail(TLSError(.protocolError), context: context)
            return
        }
        if let ciphertext = connection.takeCiphertext(allocator: context.channel.allocator) {
            context.write(wrapOutboundOut(ciphertext), promise: promise)
        } else {
            promise?.succeed(())
        }
    }

    private func writeCiphertext(context: ChannelHandlerContext, flush: Bool) {
        guard let ciphertext = connection.takeCiphertext(allocator: context.channel.allocator) else { return }
        context.write(wrapOutboundOut(ciphertext), promise: nil)
        if flush { context.flush() }
    }

    private func fail(_ error: any Error, context: ChannelHandlerContext) {
        guard state != .closed else { return }
        state = .closed
        failPending(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private func failPending(_ error: any Error) {
        let writes = pending
        pending = []
        for (_, promise) in writes { promise?.fail(error) }
    }
}

@available(*, unavailable)
extension TLSClientHandler: Sendable {}
