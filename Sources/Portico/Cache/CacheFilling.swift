import Foundation
import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoUpstream

/// Stands between a proxied exchange's handler and the connection's handler while the cache may
/// store its response: passes every event on as it comes (the client is never held back for the
/// cache) and keeps a copy of what it may store, up to `maxObjectBytes`.
///
/// When it revalidates a stored response, a `304` from the backend is not passed on: the stored
/// response, refreshed with the 304's fields (RFC 9111 §4.3.4), is the answer. When the backend
/// fails (no answer, or a 5xx) and the stored response is within its `stale-if-error`, the stale
/// response is the answer instead (RFC 5861 §4).
///
/// It ends the exchange's ``CacheFill`` whichever way the response goes. Confined to the
/// connection's event loop, like the handler it stands in front of.
final class CacheFilling: ExchangeResponder {
    private let inner: any ExchangeResponder
    private let cache: ResponseCache
    private let fill: CacheFill?
    private let stale: CachedResponse?
    private let request: CacheRequest
    private let rules: CacheRules
    private let limits: CachePolicy
    private let requestTime: Double
    /// The exchange's loop, which a write to the fleet's store is sent from.
    private let eventLoop: any EventLoop
    /// A background refresh's: no client sees its answer, so nothing is counted as served.
    private let background: Bool
    private var state = State.awaitingHead

    private enum State {
        case awaitingHead
        /// Keeping a copy: the head, when it arrived, and the freshness it was given.
        case storing(UpstreamResponseHead, receivedAt: Double, freshness: Double)
        /// The backend confirmed the stale response; its 304 head.
        case revalidated(UpstreamResponseHead, receivedAt: Double)
        /// Passing on without keeping anything.
        case passing
    }

    private var body = ByteBuffer()

    init(
        inner: any ExchangeResponder, cache: ResponseCache, fill: CacheFill?, stale: CachedResponse?, request: CacheRequest,
        rules: CacheRules, limits: CachePolicy, on eventLoop: any EventLoop, background: Bool = false
    ) {
        self.eventLoop = eventLoop
        self.background = background
        self.inner = inner
        self.cache = cache
        self.fill = fill
        self.stale = stale
        self.request = request
        self.rules = rules
        self.limits = limits
        self.requestTime = cache.now()
    }

    func handlerReceived(_ events: UpstreamEvents, for exchange: Exchange) {
        var events = events
        if let head = events.head, case .awaitingHead = state {
            let now = cache.now()
            if let stale, head.status == 304 {
                state = .revalidated(head, receivedAt: now)
                events.head = nil
            } else if let stale, head.status >= 500, request.mayServeOnError(stale, at: now) {
                // The error's body is not wanted: the exchange's work stops here.
                exchange.task?.cancel()
                fill?.abandon()
                state = .passing
                return serveStale(stale, to: exchange, upstreamStatus: head.status)
            } else {
                begin(head, at: now, exchange: exchange)
            }
        }
        if let part = events.body, case .storing = state {
            if body.readableBytes + part.readableBytes + CachedResponse.overhead > limits.maxObjectBytes {
                fill?.pass()
                body = ByteBuffer()
                state = .passing
            } else {
                var part = part
                body.writeBuffer(&part)
            }
        }
        if let result = events.result {
            switch (result, state) {
            case (.success, .storing(let head, let receivedAt, let freshness)):
                store(head: head, body: body, receivedAt: receivedAt, freshness: freshness)
            case (.success, .revalidated(let head, let receivedAt)):
                return refresh(stale!, with: head, receivedAt: receivedAt, exchange: exchange, result: result)
            case (.failure(let error), .awaitingHead):
                fill?.abandon()
                if let stale, request.mayServeOnError(stale, at: cache.now()) {
                    exchange.outcome.failure = error.description
                    return serveStale(stale, to: exchange, upstreamStatus: nil)
                }
            case (.failure, _):
                fill?.abandon()
            default:
                break
            }
        }
        inner.handlerReceived(events, for: exchange)
    }

    func handlerAnswered(_ problem: Problem, for exchange: Exchange) {
        fill?.abandon()
        if let stale, problem.status.code >= 500, request.mayServeOnError(stale, at: cache.now()) {
            exchange.outcome.failure = problem.title
            return serveStale(stale, to: exchange, upstreamStatus: nil)
        }
        inner.handlerAnswered(problem, for: exchange)
    }

    /// A facade's answer, made whole by the gateway: stored for the version's `defaultTTL` (a
    /// facade's sources say nothing the cache could take its freshness from), and passed on.
    func facadeAnswered(_ body: Data, for exchange: Exchange) {
        let now = cache.now()
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "cache-control", value: "no-store")
        if let ttl = rules.defaultTTL, ttl > 0, !request.control.noStore, body.count + CachedResponse.overhead <= limits.maxObjectBytes {
            let entry = CachedResponse(
                key: request.key, version: request.version, status: 200, headers: headers, body: ByteBuffer(bytes: body),
                contentLength: body.count, requestTime: requestTime, responseTime: now, rules: rules, freshness: ttl, request: HTTPHeaders()
            )
            commit(entry)
            exchange.cacheStatus = CacheStatus.forwarded(stale: stale != nil, stored: true)
        } else {
            fill?.pass()
            exchange.cacheStatus = CacheStatus.forwarded(stale: stale != nil)
        }
        if !background { cache.metrics?.count(.miss) }
        state = .passing
        inner.handlerFinished(exchange, status: 200, body: body, contentType: "application/json")
    }

    /// The response head has come: keep a copy if it may be stored.
    private func begin(_ head: UpstreamResponseHead, at now: Double, exchange: Exchange) {
        let storage = request.storage(
            status: head.status, headers: head.headers, contentLength: head.contentLength, rules: rules,
            maxObjectBytes: limits.maxObjectBytes,
            responseTime: now)
        // A head the client is refused (a field HTTP/1.1 cannot carry, left out of its lines) is
        // never kept: a hit made from what remains of it would be answered where the fill was not.
        if head.areSendable, case .store(let freshness) = storage {
            state = .storing(head, receivedAt: now, freshness: freshness)
            exchange.cacheStatus = CacheStatus.forwarded(stale: stale != nil, status: head.status, stored: true)
        } else {
            fill?.pass()
            state = .passing
            exchange.cacheStatus = CacheStatus.forwarded(stale: stale != nil, status: head.status)
        }
        if !background { cache.metrics?.count(.miss) }
    }

    private func commit(_ entry: CachedResponse) {
        if let shared = cache.shared, shared.sharesEntries, entry.size <= limits.maxObjectBytes {
            shared.store(entry, now: cache.now(), on: eventLoop)
        }
        if let fill {
            fill.store(entry, selectedBy: request.headers, maxBytes: limits.maxBytes)
        } else {
            cache.replace(entry, selectedBy: request.headers, maxBytes: limits.maxBytes)
        }
    }

    private func store(head: UpstreamResponseHead, body: ByteBuffer, receivedAt: Double, freshness: Double) {
        let entry = CachedResponse(
            key: request.key, version: request.version, status: head.status, headers: head.headers, body: body,
            contentLength: body.readableBytes, requestTime: requestTime, responseTime: receivedAt, rules: rules, freshness: freshness,
            request: request.headers)
        commit(entry)
    }

    /// The backend answered 304 to the revalidation: the stored response, with the 304's fields
    /// in place of its own, is stored again (if it still may be) and is the answer.
    private func refresh(
        _ stale: CachedResponse, with head: UpstreamResponseHead, receivedAt: Double, exchange: Exchange,
        result: Result<UpstreamMetrics, UpstreamError>
    ) {
        // A 304 with a field HTTP/1.1 cannot carry is not merged into the stored answer (its lines
        // left the field out): it goes on as it came, and the client is refused it, as a fill's is.
        guard head.areSendable else {
            fill?.pass()
            return inner.handlerReceived(UpstreamEvents(head: head, result: result), for: exchange)
        }
        // Every field the 304 carries replaces the stored one's lines, but its length and its hop-by-hop fields.
        let updates = head.headers.filter { name, _ in
            !HeaderName.matches(name, "content-length") && !HeaderName.matchesAny(name, ProxyForwarding.hopByHop)
        }
        var headers = stale.headers
        for (name, _) in updates { headers.remove(name: name) }
        for (name, value) in updates { headers.add(name: name, value: value) }
        let storage = request.storage(
            status: stale.status, headers: headers, contentLength: stale.contentLength, rules: rules, maxObjectBytes: limits.maxObjectBytes,
            responseTime: receivedAt)
        var freshness = 0.0
        var stores = false
        if case .store(let lifetime) = storage {
            freshness = lifetime
            stores = true
        }
        let refreshed = CachedResponse(
            key: stale.key, version: stale.version, status: stale.status, headers: headers, body: stale.body,
            contentLength: stale.contentLength,
            requestTime: requestTime, responseTime: receivedAt, rules: rules, freshness: freshness, request: request.headers)
        if stores { commit(refreshed) } else { fill?.pass() }
        if !background { cache.metrics?.count(.revalidated) }
        CachedAnswer.serve(
            refreshed, to: exchange, responder: inner, status: CacheStatus.forwarded(stale: true, status: 304, stored: stores),
            cache: cache, result: result, counted: !background)
    }

    private func serveStale(_ stale: CachedResponse, to exchange: Exchange, upstreamStatus: Int?) {
        if !background { cache.metrics?.count(.staleIfError) }
        let metrics = UpstreamMetrics(duration: .nanoseconds((NIODeadline.now() - exchange.started).nanoseconds), newConnections: 0)
        CachedAnswer.serve(
            stale, to: exchange, responder: inner, status: CacheStatus.staleIfError(status: upstreamStatus), cache: cache,
            result: .success(metrics), counted: !background)
    }
}
