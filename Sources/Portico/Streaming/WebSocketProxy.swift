import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

/// Where a WebSocket handshake's outcome goes: the client connection's handler, which alone can
/// turn its connection from HTTP into a relay.
protocol UpgradeResponder: ExchangeResponder {
    /// The backend switched: `backend` is its connection (HTTP handlers gone), `head` its `101`.
    /// The responder joins the two connections, or closes `backend` and ends `lease` if its client
    /// has gone meanwhile.
    func handlerSwitched(_ exchange: Exchange, head: UpstreamResponseHead, backend: any Channel, lease: StreamLease)
}

/// The `proxy` handler's path for a WebSocket handshake on a service with `websocket: true` (an
/// HTTP/1.1 upgrade, or an HTTP/2 stream's extended CONNECT, RFC 8441): the
/// request has passed every stage (routing, authentication, version, rate limits) as any request
/// does; here the handshake is checked, a place is taken within `maxUpgraded`, and the request goes
/// to a target of the backend over a connection of its own (``UpstreamUpgrade``). A `101` that
/// completes the handshake (RFC 6455 §4.1) is handed to the connection to join; any other answer
/// is relayed as an ordinary answer, and the connection closes after it.
struct WebSocketProxy: Sendable {
    let streams: OpenStreams
    let tls: UpstreamUpgrade.TLSContexts
    let scheme: String
    let metrics: GatewayMetrics?

    /// Starts the handshake with the backend; a problem instead when it cannot be sent.
    func start(
        _ exchange: Exchange, proxy: ProxyPolicy, backend: CompiledBackend, on eventLoop: any EventLoop, responder: any UpgradeResponder
    ) -> Problem? {
        guard let routed = exchange.routed else { return .badGateway(backend: proxy.backend) }
        // Over HTTP/1.1 an Upgrade with the client's key; over HTTP/2 an extended CONNECT
        // (RFC 8441), for which the gateway draws the key it sends the backend.
        let tunnelled = exchange.tunnelProtocol != nil
        let checked =
            tunnelled
            ? WebSocketHandshake.extendedConnect(exchange.head)
            : WebSocketHandshake.request(exchange.head, hasBody: exchange.framing.expectsBody)
        let handshake: WebSocketHandshake
        switch checked {
        case .success(let valid): handshake = valid
        case .failure(let error): return .webSocketHandshake(error)
        }
        let service = routed.service
        let tier = exchange.tier.flatMap { exchange.snapshot.policy.tiers[$0] }
        let place: OpenStreams.Place
        switch streams.admit(
            service: service.name, serviceLimit: service.policy.streams.maxUpgraded, key: exchange.keyID, keyLimit: tier?.maxUpgraded)
        {
        case .success(let admitted): place = admitted
        case .failure(let refusal): return .tooManyStreams(refusal, service: service.name, tier: exchange.tier)
        }
        let target: CompiledTarget
        switch backend.pick(hashKey: HashInputs(exchange).key(for: backend).utf8) {
        case .success(let chosen): target = chosen
        case .failure(let unavailable):
            streams.release(place)
            return backend.problem(unavailable)
        }
        let lease = StreamLease(place: place, streams: streams, backend: backend, target: target, metrics: metrics)
        var request = ProxyForwarding.upstreamRequest(
            head: tunnelled ? handshake.backendHead(from: exchange.head) : exchange.head, body: nil, routed: routed, proxy: proxy,
            backend: backend, target: target,
            clientAddress: exchange.client.address, scheme: scheme, requestID: exchange.requestID, credentials: exchange.credentialFields,
            versionedPrefix: exchange.versionedPrefix, traced: exchange.trace != nil)
        request.headers.add(name: "Connection", value: "Upgrade")
        request.headers.add(name: "Upgrade", value: "websocket")
        exchange.outcome.backend = backend.name
        exchange.outcome.attempts = 1
        if backend.targets.count > 1 { exchange.outcome.target = target.origin }
        let attempt = UpgradeAttempt()
        exchange.task = attempt
        let started = NIODeadline.now()
        UpstreamUpgrade.open(request, serverName: target.serverName, tls: tls, on: eventLoop).assumeIsolated().whenComplete { result in
            let metrics = UpstreamMetrics(duration: .nanoseconds((NIODeadline.now() - started).nanoseconds), newConnections: 1)
            switch result {
            case .failure(let error):
                lease.end()
                let upstreamError = error as? UpstreamError ?? UpstreamError(.connectFailed, detail: "\(error)")
                responder.handlerReceived(UpstreamEvents(result: .failure(upstreamError)), for: exchange)
            case .success(.answered(let head, let body)):
                lease.end()
                // Over HTTP/2 a 2xx (or any answer short of a refusal) would tell the client the
                // tunnel is open (RFC 8441 §5): only the backend's refusals are relayed as they came.
                if tunnelled, head.status < 400 {
                    let reason = "it answered \(head.status) instead of 101"
                    exchange.outcome.failure = "WebSocket handshake: \(reason)"
                    return responder.handlerAnswered(.webSocketAnswer(backend: backend.name, reason: reason), for: exchange)
                }
                responder.handlerReceived(UpstreamEvents(head: head, body: body, result: .success(metrics)), for: exchange)
            case .success(.switched(let head, let channel)):
                guard attempt.connected(channel) else {
                    lease.end()
                    return
                }
                if let reason = handshake.problem(withAnswer: head.headers) {
                    channel.close(promise: nil)
                    lease.end()
                    exchange.outcome.failure = "WebSocket handshake: \(reason)"
                    return responder.handlerAnswered(.webSocketAnswer(backend: backend.name, reason: reason), for: exchange)
                }
                exchange.outcome.upstreamDuration = metrics.duration
                exchange.outcome.upstreamConnects = 1
                responder.handlerSwitched(exchange, head: head, backend: channel, lease: lease)
            }
        }
        return nil
    }
}

/// What a stream holds while it is open, given back once when it ends: its place among the
/// service's and key's streams, and its target's in-flight count (a least-connections balancer
/// counts a stream as the request it is).
final class StreamLease: Sendable {
    let place: OpenStreams.Place
    private let streams: OpenStreams
    private let backend: CompiledBackend
    private let target: CompiledTarget
    private let metrics: GatewayMetrics?
    /// Whether the stream opened (it counts in the metrics) and whether it has ended.
    private let state = NIOLockedValueBox((opened: false, ended: false))

    init(place: OpenStreams.Place, streams: OpenStreams, backend: CompiledBackend, target: CompiledTarget, metrics: GatewayMetrics?) {
        self.place = place
        self.streams = streams
        self.backend = backend
        self.target = target
        self.metrics = metrics
    }

    /// The stream is open: it counts in the metrics, and a reload can close it with `close`,
    /// until ``end()``.
    func opened(close: @escaping @Sendable (UpgradedStream.Ending) -> Void) {
        let ended = state.withLockedValue { state in
            if !state.ended { state.opened = true }
            return state.ended
        }
        guard !ended else { return }
        metrics?.streamOpened(.websocket)
        streams.register(place, close: close)
    }

    /// Gives everything back; only the first call does anything.
    func end() {
        let (first, opened) = state.withLockedValue { state in
            defer { state.ended = true }
            return (!state.ended, state.opened)
        }
        guard first else { return }
        streams.release(place)
        backend.release(target)
        if opened { metrics?.streamClosed(.websocket) }
    }
}

/// The exchange's task while the handshake is out: a client that leaves meanwhile closes the
/// backend connection as soon as there is one.
final class UpgradeAttempt: UpstreamTask {
    private let state = NIOLockedValueBox<(cancelled: Bool, channel: (any Channel)?)>((false, nil))

    func cancel() {
        let channel = state.withLockedValue { state in
            state.cancelled = true
            return state.channel
        }
        channel?.close(promise: nil)
    }

    func consumed(bytes: Int) {}

    /// The backend switched on `channel`: false (and the channel closed) if the client left first.
    func connected(_ channel: any Channel) -> Bool {
        let cancelled = state.withLockedValue { state in
            state.channel = channel
            return state.cancelled
        }
        if cancelled { channel.close(promise: nil) }
        return !cancelled
    }
}
