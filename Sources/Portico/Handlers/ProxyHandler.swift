import NIOCore
import PorticoPolicy
import PorticoUpstream

/// The `proxy` handler: sends the admitted request to its backend through the gateway's
/// ``UpstreamClient`` and hands what comes back to the connection's handler.
struct ProxyHandler: Sendable {
    let upstream: any UpstreamClient
    let concurrency: BackendConcurrency
    let scheme: String

    /// Starts the exchange; a problem instead when it cannot be sent (the backend's concurrency
    /// cap is reached). Events arrive on `eventLoop`, tagged with the exchange.
    func start(
        _ exchange: Exchange, proxy: ProxyPolicy, backend: CompiledBackend, on eventLoop: any EventLoop, responder: any ExchangeResponder
    ) -> Problem? {
        // A proxied request has always been routed; answer rather than hang.
        guard let routed = exchange.routed else { return .badGateway(backend: proxy.backend) }
        switch concurrency.slot(for: backend) {
        case .success(let slot): exchange.concurrencySlot = slot
        case .failure(let busy): return busy
        }
        let request = ProxyForwarding.upstreamRequest(
            head: exchange.head, body: exchange.body, routed: routed, proxy: proxy, backend: backend,
            clientAddress: exchange.client.address, scheme: scheme, requestID: exchange.requestID, dropping: exchange.credentialHeader,
            versionedPrefix: exchange.versionedPrefix)
        exchange.body = nil
        exchange.task = upstream.execute(request, eventLoop: eventLoop, handler: UpstreamDelivery(exchange: exchange, responder: responder))
        return nil
    }

    /// The problem answering a backend that failed before its response began.
    static func problem(for error: UpstreamError, backend: String) -> Problem {
        error.kind == .timedOut ? .gatewayTimeout(backend: backend) : .badGateway(backend: backend)
    }
}

/// Routes one exchange's upstream events to the connection. A separate object per exchange, so
/// that events of a cancelled exchange are recognised as stale and cannot reach the next one.
private final class UpstreamDelivery: UpstreamResponseHandler {
    private let exchange: Exchange
    private let responder: any ExchangeResponder

    init(exchange: Exchange, responder: any ExchangeResponder) {
        self.exchange = exchange
        self.responder = responder
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        responder.handlerReceived(events, for: exchange)
    }
}
