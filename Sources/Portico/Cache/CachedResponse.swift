import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import Synchronization

/// Where a stored response lives in the cache: the service it was routed to and its normalised
/// target (path and query). Entries of every API version and `Vary` variant of one target share
/// it, so that an unsafe request to the target, or a purge of it, drops them all.
struct CacheKey: Hashable, Sendable {
    let service: String
    let target: String
}

/// One stored response, immutable once stored (a revalidation stores a new one), with what
/// RFC 9111 §4.2 needs to tell its age and freshness later.
///
/// Times are seconds since 1970 on the cache's clock (``ResponseCache/now()``), with fractions:
/// `Date`, `Expires` and `Last-Modified` are wall-clock moments, so the cache's clock is one too.
final class CachedResponse: Sendable {
    let key: CacheKey
    let version: Int
    let status: Int
    /// The backend's fields as it sent them, but `Age` (the cache sends its own).
    let headers: HTTPHeaders
    let body: ByteBuffer
    /// The representation's length, which a response to HEAD announces too.
    let contentLength: Int
    /// When the response was received (`response_time`).
    let responseTime: Double
    /// Its age when received (`corrected_initial_age`, §4.2.3).
    let correctedInitialAge: Double
    /// How long it is fresh for, from its own fields or the policy's `defaultTTL` (§4.2.1).
    let freshnessLifetime: Double
    let control: CacheControl
    /// Past freshness, how long it may be served while a refresh runs, and when the backend fails.
    let staleWhileRevalidate: Double
    let staleIfError: Double
    let etag: String?
    let lastModified: String?
    /// The request fields its `Vary` names (lowercased) and the values they had in the request
    /// that stored it (nil: absent).
    let varyNames: [String]
    let varyValues: [String?]
    /// `Surrogate-Key` and `Cache-Tag` values, for a purge by tag.
    let tags: [String]
    /// What it counts against `maxBytes`.
    let size: Int

    /// Bytes counted per entry beyond its fields and body: the object, its node, its key.
    static let overhead = 256

    /// The body compressed, per coding, made the first time a client asks for it and kept with
    /// the entry (and counted against the cache's bytes), so that no hit compresses again.
    private let encodings = Mutex<[ContentCoding: ByteBuffer]>([:])

    /// The body in `coding`, compressed now if no earlier request needed it; the bytes it adds
    /// are the second value (0 when it was there already).
    func body(in coding: ContentCoding, level: Int) -> (body: ByteBuffer, added: Int)? {
        if let stored = encodings.withLock({ $0[coding] }) { return (stored, 0) }
        guard let compressed = try? StreamEncoders.encodeWhole(body, coding: coding, level: level) else { return nil }
        let added = encodings.withLock { encodings -> Int in
            guard encodings[coding] == nil else { return 0 }
            encodings[coding] = compressed
            return compressed.readableBytes
        }
        return (compressed, added)
    }

    init(
        key: CacheKey, version: Int, status: Int, headers: HTTPHeaders, body: ByteBuffer, contentLength: Int, requestTime: Double,
        responseTime: Double, rules: CacheRules?, freshness: Double, request: HTTPHeaders
    ) {
        var stored = headers
        // The first value of the first line (RFC 9111 §4.2.1); one that is not delta-seconds is ignored.
        let ageValue =
            stored.first(name: "age").flatMap { line in
                CacheControl.delta(line.split(separator: ",", omittingEmptySubsequences: false).first?.trimmingOptionalWhitespace())
            } ?? 0
        stored.remove(name: "age")
        self.key = key
        self.version = version
        self.status = status
        self.headers = stored
        self.body = body
        self.contentLength = contentLength
        self.responseTime = responseTime
        // §4.2.3: the larger of the age the Date field implies and the one the Age field says
        // plus the time the request took.
        let date = stored.first(name: "date").flatMap(HTTPDate.parse).map(Double.init) ?? responseTime
        let apparentAge = max(0, responseTime - date)
        let correctedAgeValue = Double(ageValue) + (responseTime - requestTime)
        correctedInitialAge = max(apparentAge, correctedAgeValue)
        freshnessLifetime = freshness
        let control = ResponseDirectives(stored).control
        self.control = control
        staleWhileRevalidate = control.staleWhileRevalidate.map(Double.init) ?? rules?.staleWhileRevalidate ?? 0
        staleIfError = control.staleIfError.map(Double.init) ?? rules?.staleIfError ?? 0
        etag = stored.first(name: "etag")
        lastModified = stored.first(name: "last-modified")
        varyNames = Self.varyNames(stored)
        varyValues = varyNames.map { Self.fieldValue($0, in: request) }
        tags = Self.tags(stored)
        size = Self.size(headers: stored, body: body)
    }

    /// An entry as another gateway stored it (``CachedResponse/decode(_:key:version:)``): its
    /// times and windows as they were computed there.
    init(
        key: CacheKey, version: Int, status: Int, headers: HTTPHeaders, body: ByteBuffer, responseTime: Double, correctedInitialAge: Double,
        freshnessLifetime: Double, staleWhileRevalidate: Double, staleIfError: Double, varyNames: [String], varyValues: [String?]
    ) {
        self.key = key
        self.version = version
        self.status = status
        self.headers = headers
        self.body = body
        self.contentLength = body.readableBytes
        self.responseTime = responseTime
        self.correctedInitialAge = correctedInitialAge
        self.freshnessLifetime = freshnessLifetime
        self.control = ResponseDirectives(headers).control
        self.staleWhileRevalidate = staleWhileRevalidate
        self.staleIfError = staleIfError
        etag = headers.first(name: "etag")
        lastModified = headers.first(name: "last-modified")
        self.varyNames = varyNames
        self.varyValues = varyValues
        tags = Self.tags(headers)
        size = Self.size(headers: headers, body: body)
    }

    /// What an entry of these fields and body counts against `maxBytes`.
    static func size(headers: HTTPHeaders, body: ByteBuffer) -> Int {
        var size = overhead + body.readableBytes
        for (name, value) in headers { size += name.utf8.count + value.utf8.count + 4 }
        return size
    }

    /// The response's age now (`current_age`, §4.2.3).
    func age(at now: Double) -> Double {
        correctedInitialAge + max(0, now - responseTime)
    }

    /// How far past its freshness it is (negative while fresh).
    func staleness(at now: Double) -> Double {
        age(at: now) - freshnessLifetime
    }

    /// Whether it may never be served stale (§4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10: a shared
    /// cache treats `s-maxage` as `proxy-revalidate`).
    var mustRevalidate: Bool { control.mustRevalidate || control.proxyRevalidate || control.sMaxAge != nil }

    /// Whether this variant is the one `request` selects (§4.1): every field its `Vary` names has
    /// the same value (after the list's whitespace is normalised), or is absent in both.
    func matches(_ request: HTTPHeaders) -> Bool {
        for (name, value) in zip(varyNames, varyValues) where Self.fieldValue(name, in: request) != value { return false }
        return true
    }

    /// The `Vary` names, lowercased; `*` among them when present.
    static func varyNames(_ headers: HTTPHeaders) -> [String] {
        var names: [String] = []
        for line in headers["vary"] {
            for name in line.split(separator: ",") {
                let trimmed = name.trimmingOptionalWhitespace().lowercased()
                if !trimmed.isEmpty && !names.contains(trimmed) { names.append(trimmed) }
            }
        }
        return names
    }

    /// A request field's lines joined into one list value, with the whitespace around each
    /// element removed, so that `a, b` and `a,b` select the same variant.
    static func fieldValue(_ name: String, in headers: HTTPHeaders) -> String? {
        let lines = headers[name]
        guard !lines.isEmpty else { return nil }
        return lines.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map { $0.trimmingOptionalWhitespace() }
            .joined(separator: ",")
    }

    static func tags(_ headers: HTTPHeaders) -> [String] {
        var tags: [String] = []
        for line in headers["surrogate-key"] { tags += line.split(separator: " ").map(String.init) }
        for line in headers["cache-tag"] {
            tags += line.split(separator: ",").map { String($0.trimmingOptionalWhitespace()) }.filter { !$0.isEmpty }
        }
        return tags
    }
}
