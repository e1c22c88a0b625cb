import Foundation
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

/// Passes an unsafe request's answer on and, when its status says it succeeded (2xx or 3xx),
/// drops what the cache holds for the request's target and for the targets its `Location` and
/// `Content-Location` name on the same host (RFC 9111 §4.4). A failed request changed nothing,
/// so it drops nothing.
final class CacheInvalidation: ExchangeResponder {
    private let inner: any ExchangeResponder
    private let cache: ResponseCache
    private let key: CacheKey
    private let eventLoop: any EventLoop

    init(inner: any ExchangeResponder, cache: ResponseCache, key: CacheKey, on eventLoop: any EventLoop) {
        self.inner = inner
        self.cache = cache
        self.key = key
        self.eventLoop = eventLoop
    }

    func handlerReceived(_ events: UpstreamEvents, for exchange: Exchange) {
        if let head = events.head, (200..<400).contains(head.status) {
            var keys = [key]
            for name in ["location", "content-location"] {
                if let value = head.headers.first(name: name), let other = Self.key(for: value, of: exchange), !keys.contains(other) {
                    keys.append(other)
                }
            }
            for key in keys {
                cache.invalidate(key)
                // The fleet's store, and every gateway's memory.
                if let shared = cache.shared {
                    let versions = exchange.policy.snapshot.policy.services[key.service].map { Array($0.versions.keys) } ?? []
                    _ = shared.purge(.target(service: key.service, target: key.target), versions: versions, services: [], on: eventLoop)
                }
            }
        }
        inner.handlerReceived(events, for: exchange)
    }

    func handlerAnswered(_ problem: Problem, for exchange: Exchange) {
        inner.handlerAnswered(problem, for: exchange)
    }

    /// The cache key of a URI reference from a response field, routed as a GET for it would be;
    /// nil for another host's, or one no service serves.
    static func key(for reference: String, of exchange: Exchange) -> CacheKey? {
        var target = Substring(reference)
        if let scheme = target.range(of: "://") {
            let rest = target[scheme.upperBound...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" }
            guard let host = exchange.head.headers.first(name: "host"),
                Route.hostWithoutPort(String(authority)) == Route.hostWithoutPort(host)
            else { return nil }
            target = rest[authority.endIndex...]
        }
        guard target.hasPrefix("/") else { return nil }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: String(target), headers: exchange.head.headers)
        guard case .success(let routed) = Route.resolve(head, in: exchange.policy) else { return nil }
        return CacheKey(service: routed.service.name, target: CacheStage.target(routed))
    }
}
