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
        // Only a backend that hashes reads the request's inputs: gathering them copies three of the
        // exchange's fields, a retain and a release each, on every request.
        let hashKey: Substring
        if case .hash = backend.balancer.mode { hashKey = HashInputs(exchange).key(for: backend) } else { hashKey = "" }
        switch backend.pick(hashKey: hashKey.utf8) {
        case .success(let chosen): target = chosen
        case .failure(let unavailable): return backend.problem(unavailable)
        }
        switch concurrency.slot(for: backend) {
        case .success(let slot): exchange.concurrencySlot = slot
        case .failure(let busy):
            backend.release(target)
            return busy
        }
        var request = ProxyForwarding.upstreamRequest(
            head: exchange.head, body: exchange.body, routed: routed, proxy: proxy, backend: backend, target: target,
            clientAddress: exchange.client.address, scheme: scheme, requestID: exchange.requestID, credentials: exchange.credentialFields,
            versionedPrefix: exchange.versionedPrefix, traced: exchange.trace != nil,
            eventIdleTimeout: routed.service.policy.streams.idleTimeout)
        exchange.body = nil
        // Filling or revalidating the cache: the whole response is wanted, or the stored one confirmed.
        if case .fetch(_, let stale, _) = exchange.cache { CachedAnswer.conditions(&request.headers, revalidating: stale) }
        let attempts = ProxyAttempts(
            exchange: exchange, responder: responder, backend: backend, target: target, hashKey: hashKey, upstream: upstream,
            eventLoop: eventLoop, logger: logger)
        exchange.task = attempts
        // Handed over, not copied: a copy of the request is a retain and a release of each of its
        // fields (the headers, the URL, the body).
        attempts.start(consume request)
        return nil
    }

    /// The problem answering a backend that failed before its response began.
    static func problem(for error: UpstreamError, backend: String) -> Problem {
        error.kind == .timedOut ? .gatewayTimeout(backend: backend) : .badGateway(backend: backend)
    }
}

/// What `balance: hash` may hash of a request: its key id, its client's address, its headers. A
/// proxied request and the fetches a facade or code handler makes for it hash the same.
struct HashInputs: Sendable {
    var keyID: String?
    var address: String?
    var headers: HTTPHeaders

    init(_ exchange: Exchange) {
        keyID = exchange.keyID
        address = exchange.client.address
        headers = exchange.head.headers
    }

    /// The key for `backend`'s `hashOn` (the client address when there is no key id or no such
    /// header); empty for a backend that does not hash, which then reads nothing.
    func key(for backend: CompiledBackend) -> Substring {
        guard case .hash(_, let on) = backend.balancer.mode else { return "" }
        let address = address ?? ""
        switch on {
        case .key: return (keyID ?? address)[...]
        case .address: return address[...]
        case .header(let name): return (headers.first(name: name) ?? address)[...]
        }
    }
}
