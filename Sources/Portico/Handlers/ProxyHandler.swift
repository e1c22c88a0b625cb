import Logging
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream
import Synchronization

/// The `proxy` handler: sends the admitted request to a target of its backend (chosen by the
/// backend's balancer, ``CompiledBackend/pick(hashKey:tried:)``) through the gateway's
/// ``UpstreamClient``, retries it on another where that is safe (``ProxyAttempts``), and hands
/// what comes back to the connection's handler.
struct ProxyHandler: Sendable {
    let upstream: any UpstreamClient
    let concurrency: BackendConcurrency
    let scheme: String
    /// Where retries are told (at `notice`: the backend's failure, not the gateway's).
    let logger: Logger

    /// Starts the exchange; a problem instead when it cannot be sent (every target is down, or at
    /// its cap; the backend's concurrency cap is reached). Events arrive on `eventLoop`, tagged
    /// with the exchange.
    func start(
        _ exchange: Exchange, proxy: ProxyPolicy, backend: CompiledBackend, on eventLoop: any EventLoop, responder: any ExchangeResponder
    ) -> Problem? {
        // A proxied request has always been routed; answer rather than hang.
        guard let routed = exchange.routed else { return .badGateway(backend: proxy.backend) }
        let target: CompiledTarget
        switch backend.pick(hashKey: Self.hashKey(exchange, backend: backend)) {
        case .success(let chosen): target = chosen
        case .failure(.allDown(let retryAfter)): return .backendDown(backend: backend.name, retryAfter: retryAfter)
        case .failure: return .backendBusy(backend: backend.name, limit: backend.maxConcurrentPerTarget ?? 0)
        }
        switch concurrency.slot(for: backend) {
        case .success(let slot): exchange.concurrencySlot = slot
        case .failure(let busy): return busy
        }
        let request = ProxyForwarding.upstreamRequest(
            head: exchange.head, body: exchange.body, routed: routed, proxy: proxy, backend: backend, target: target,
            clientAddress: exchange.client.address, scheme: scheme, requestID: exchange.requestID, dropping: exchange.credentialHeader,
            versionedPrefix: exchange.versionedPrefix)
        exchange.body = nil
        let attempts = ProxyAttempts(
            exchange: exchange, responder: responder, backend: backend, target: target, request: request, upstream: upstream,
            eventLoop: eventLoop, logger: logger)
        exchange.task = attempts
        attempts.start()
        return nil
    }

    /// What `balance: hash` hashes for this request: its key id, its client's address or a header's
    /// value (the address when there is no key or no such header); nothing for other balancers.
    static func hashKey(_ exchange: Exchange, backend: CompiledBackend) -> Substring.UTF8View {
        guard case .hash(_, let on) = backend.balancer.mode else { return ""[...].utf8 }
        let address = exchange.client.address ?? ""
        switch on {
        case .key: return (exchange.keyID ?? address)[...].utf8
        case .address: return address[...].utf8
        case .header(let name): return (exchange.head.headers.first(name: name) ?? address)[...].utf8
        }
    }

    /// The problem answering a backend that failed before its response began.
    static func problem(for error: UpstreamError, backend: String) -> Problem {
        error.kind == .timedOut ? .gatewayTimeout(backend: backend) : .badGateway(backend: backend)
    }
}
