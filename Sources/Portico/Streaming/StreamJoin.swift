import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

/// Turns a client connection whose request the backend switched to WebSocket from HTTP into one
/// side of an ``UpgradedStream``: the connection's HTTP handlers leave, a ``StreamRelayHandler``
/// takes their place on it and on the backend's connection.
///
/// The order matters for the bytes already read: both relays are in place before the gateway
/// handler leaves (it hands on what the client sent after its handshake, which its request decoder
/// kept) and before the backend's ``UpgradedBytesBuffer`` does (it hands on what the backend sent
/// after its `101`), so each of those finds the relay that carries it to the other side.
enum StreamJoin {
    /// Joins `client` (the gateway handler's context, which leaves too) and `backend`, on the
    /// client's event loop, which is the backend connection's as well. The stream then runs on its
    /// own; `finished` is called once both connections have closed.
    static func join(
        client context: ChannelHandlerContext, backend: any Channel, limits: ServiceStreamLimits,
        finished: @escaping (UpgradedStream) -> Void
    ) throws -> UpgradedStream {
        let (stream, clientRelay, backendRelay) = relays(client: context, backend: backend, limits: limits, finished: finished)
        let pipeline = context.pipeline.syncOperations
        let backendPipeline = backend.pipeline.syncOperations
        // Everything that can fail, before anything changes: on a failure the connection is still
        // the gateway handler's, whose close ends the exchange once.
        let held = try backendPipeline.context(handlerType: UpgradedBytesBuffer.self)
        try backendPipeline.addHandler(backendRelay)
        try pipeline.addHandler(clientRelay)
        // HTTP's handlers leave; a handler the listener may not have is skipped.
        if let timeouts = try? pipeline.context(handlerType: ConnectionTimeoutHandler.self) {
            pipeline.removeHandler(context: timeouts, promise: nil)
        }
        // What the backend sent after its 101 goes now (with a read-complete, which flushes it).
        backendPipeline.removeHandler(context: held, promise: nil)
        backend.read()
        // The gateway handler hands the client's bytes on as it leaves, without a read-complete:
        // the backend's side is flushed once it has.
        let channel = context.channel
        pipeline.removeHandler(context: context).whenComplete { _ in
            backend.flush()
            channel.read()
        }
        return stream
    }

    /// Joins an HTTP/2 stream that opened a WebSocket with extended CONNECT (RFC 8441) and
    /// `backend`. NIO's HTTP/2-to-HTTP/1 codec stays (it cannot be removed): a
    /// ``TunnelStreamAdapter`` in the gateway handler's place turns its body parts into the relay's
    /// bytes and back. The stream's timeouts leave with the gateway handler; its flow control
    /// paces the relay as a TCP connection's buffer does.
    static func joinTunnel(
        client context: ChannelHandlerContext, backend: any Channel, limits: ServiceStreamLimits,
        finished: @escaping (UpgradedStream) -> Void
    ) throws -> UpgradedStream {
        let (stream, clientRelay, backendRelay) = relays(client: context, backend: backend, limits: limits, finished: finished)
        let pipeline = context.pipeline.syncOperations
        let backendPipeline = backend.pipeline.syncOperations
        let held = try backendPipeline.context(handlerType: UpgradedBytesBuffer.self)
        let timeouts = try pipeline.context(handlerType: StreamTimeoutHandler.self)
        try backendPipeline.addHandler(backendRelay)
        try pipeline.addHandler(TunnelStreamAdapter())
        try pipeline.addHandler(clientRelay)
        pipeline.removeHandler(context: timeouts, promise: nil)
        pipeline.removeHandler(context: context, promise: nil)
        backendPipeline.removeHandler(context: held, promise: nil)
        backend.read()
        context.channel.read()
        return stream
    }

    /// The stream and the relay for each side, joined to each other, not yet in any pipeline.
    private static func relays(
        client context: ChannelHandlerContext, backend: any Channel, limits: ServiceStreamLimits,
        finished: @escaping (UpgradedStream) -> Void
    ) -> (UpgradedStream, client: StreamRelayHandler, backend: StreamRelayHandler) {
        precondition(backend.eventLoop === context.eventLoop, "a stream's two connections share one event loop")
        let stream = UpgradedStream(
            eventLoop: context.eventLoop, idleTimeout: limits.idleTimeout, maxLifetime: limits.maxLifetime, finished: finished)
        let clientRelay = StreamRelayHandler(side: .client, stream: stream)
        let backendRelay = StreamRelayHandler(side: .backend, stream: stream)
        stream.join(client: clientRelay, backend: backendRelay)
        return (stream, clientRelay, backendRelay)
    }
}
