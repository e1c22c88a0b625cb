import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoUpstream

/// A stored response as the answer to a request: with its current `Age`, or as `304 Not
/// Modified` when the request's own validators match it (RFC 9110 §13.1.2, §13.1.3; RFC 9111 §4.3.2).
enum CachedAnswer {
    /// Fields a 304 carries from the stored response (RFC 9110 §15.4.5), besides `Age`.
    static let notModifiedFields = ["cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified"]

    /// Delivers `entry` to `responder` as `exchange`'s whole answer, marked `status` in
    /// `Cache-Status`. `result` ends it (a revalidation's own, when the backend confirmed it).
    /// - Parameter counted: whether a client receives it (a background refresh's answer is not
    ///   counted as bytes served).
    static func serve(
        _ entry: CachedResponse, to exchange: Exchange, responder: any ExchangeResponder, status: String, cache: ResponseCache,
        result: Result<UpstreamMetrics, UpstreamError> = .success(UpstreamMetrics(duration: .zero, newConnections: 0)),
        counted: Bool = true
    ) {
        exchange.cacheStatus = status
        let age = String(Int(entry.age(at: cache.now()).rounded(.down)))
        // What compression would make of the body for this client: a 304 must describe the same
        // representation a 200 would (its weak ETag, its Vary).
        let compression = exchange.routed?.rules.compression.flatMap { rules in
            rules.mayCompress(status: entry.status, headers: entry.headers, contentLength: entry.contentLength) ? rules : nil
        }
        let coding = exchange.head.method == .HEAD ? nil : compression?.negotiate(exchange.head.headers)
        if notModified(exchange.head.headers, entry) {
            var headers = HTTPHeaders()
            for (name, value) in entry.headers where notModifiedFields.contains(name.lowercased()) { headers.add(name: name, value: value) }
            headers.add(name: "Age", value: age)
            if compression != nil, exchange.head.method != .HEAD { headers.add(name: "Vary", value: "Accept-Encoding") }
            if coding != nil, let etag = headers.first(name: "etag") { headers.replaceOrAdd(name: "ETag", value: EntityTag.weakened(etag)) }
            let head = UpstreamResponseHead(status: 304, headers: headers)
            responder.handlerReceived(UpstreamEvents(head: head, result: result), for: exchange)
            return
        }
        var headers = entry.headers
        headers.add(name: "Age", value: age)
        var body = entry.body
        var length = entry.contentLength
        // Compressed once per coding and kept with the entry: a hit never compresses again.
        if exchange.head.method != .HEAD, let rules = compression {
            headers.add(name: "Vary", value: "Accept-Encoding")
            if let coding, let encoded = entry.body(in: coding, level: rules.level(coding)) {
                cache.grew(entry, by: encoded.added, maxBytes: (exchange.snapshot.policy.cache ?? CachePolicy()).maxBytes)
                CompressionRules.compressedHead(&headers, coding: coding)
                body = encoded.body
                length = encoded.body.readableBytes
            }
        }
        let head = UpstreamResponseHead(status: entry.status, headers: headers, contentLength: length)
        let sendsBody = exchange.head.method != .HEAD && length > 0
        if counted { cache.metrics?.served(bytes: sendsBody ? length : 0) }
        responder.handlerReceived(UpstreamEvents(head: head, body: sendsBody ? body : nil, result: result), for: exchange)
    }

    /// Whether the request's `If-None-Match` (or, without one, `If-Modified-Since`) says the
    /// client already has this response.
    static func notModified(_ request: HTTPHeaders, _ entry: CachedResponse) -> Bool {
        guard entry.status == 200 else { return false }
        let noneMatch = request["if-none-match"]
        if !noneMatch.isEmpty {
            guard let etag = entry.etag else { return false }
            return EntityTag.noneMatchNames(noneMatch, etag: etag)
        }
        guard let since = request.first(name: "if-modified-since").flatMap(HTTPDate.parse),
            let modified = (entry.lastModified ?? entry.headers.first(name: "date")).flatMap(HTTPDate.parse)
        else { return false }
        return modified <= since
    }

    /// The request the backend receives when the cache fills or revalidates: the client's own
    /// validators are removed (the cache wants the whole response, to store it and to answer the
    /// client's conditions itself), and the stored response's are added when revalidating it.
    static func conditions(_ headers: inout FieldLines, revalidating stale: CachedResponse?) {
        headers.remove(name: "if-none-match")
        headers.remove(name: "if-modified-since")
        guard let stale else { return }
        if let etag = stale.etag { headers.add(name: "If-None-Match", value: etag) }
        if let lastModified = stale.lastModified { headers.add(name: "If-Modified-Since", value: lastModified) }
    }
}

/// The `Cache-Status` values (RFC 9211) the gateway writes, as `Portico; …`.
enum CacheStatus {
    static let name = "Portico"

    static func hit(collapsed: Bool, stale: Bool = false) -> String {
        "\(name); hit" + (collapsed ? "; collapsed" : "") + (stale ? "; detail=stale" : "")
    }

    static let staleWhileRevalidate = "\(name); hit; detail=stale-while-revalidate"

    /// Forwarded to the backend: `miss` without a stored response, `stale` when one was revalidated.
    static func forwarded(stale: Bool, status: Int? = nil, stored: Bool = false, collapsed: Bool = false) -> String {
        var value = "\(name); fwd=\(stale ? "stale" : "miss")"
        if let status { value += "; fwd-status=\(status)" }
        if stored { value += "; stored" }
        if collapsed { value += "; collapsed" }
        return value
    }

    static let bypass = "\(name); fwd=bypass"

    /// Served stale because the backend failed (`status` when it answered at all).
    static func staleIfError(status: Int?) -> String {
        "\(name); fwd=stale" + (status.map { "; fwd-status=\($0)" } ?? "") + "; detail=stale-if-error"
    }
}
