import Foundation

/// The façade's private HTTP cache of GET answers (RFC 9111, the parts a private client cache needs),
/// bounded in entries and bytes, least recently used out first.
///
/// - A 200 is stored unless `Cache-Control` says `no-store` or it `Vary`s on `*`; it is fresh for
///   `max-age` less `Age` (`no-cache`, or no `max-age`: not fresh at all, so every use revalidates).
///   An answer that is neither fresh nor has an `ETag` is not worth keeping.
/// - A stale entry with an `ETag` is revalidated with `If-None-Match`; a 304 refreshes its
///   freshness and fields, and the stored body answers.
/// - The key holds the URL and the request's own fields with the per-request credentials, so one
///   user's answer never serves another; the app's identity is fixed per façade.
/// - A successful unsafe request (`POST`, `PUT`, `DELETE`…) to a URL drops what is stored for it
///   (RFC 9111 §4.4): the next GET asks the gateway.
///
/// - Every clearing and invalidation starts a new *generation*. An answer is stored only by a request
///   that began in the current one, so a GET that was already out when the cache was cleared (at
///   logout) or its URL written cannot put back what was dropped.
///
/// It is a value type, used under the façade's lock; nothing here waits.
struct ResponseCache {
    struct Key: Hashable, Sendable {
        var url: String
        /// The request's fields and its credentials' fields, names lowercased.
        var fields: [String: String]
    }

    private struct Entry {
        var response: APIResponseData
        var freshUntil: Date
        var lastUse: UInt64
        var size: Int
    }

    let entryLimit: Int
    let byteLimit: Int
    private var entries: [Key: Entry] = [:]
    private var bytes = 0
    private var uses: UInt64 = 0
    /// Bumped by ``clear()`` and ``invalidate(url:)``; see the type's comment.
    private(set) var generation: UInt64 = 0

    init(entryLimit: Int, byteLimit: Int) {
        self.entryLimit = entryLimit
        self.byteLimit = byteLimit
    }

    var count: Int { entries.count }

    /// The stored answer if it is still fresh at `now`.
    mutating func fresh(_ key: Key, now: Date) -> APIResponseData? {
        guard var entry = entries[key], now < entry.freshUntil else { return nil }
        uses += 1
        entry.lastUse = uses
        entries[key] = entry
        return entry.response
    }

    /// The `ETag` to revalidate a stored (stale) answer with.
    func validator(_ key: Key) -> String? { entries[key]?.response.header("etag") }

    /// Keeps a 200 when HTTP allows it and it can be used again, unless the cache was cleared or
    /// the URL invalidated since `generation` (when the request began).
    mutating func store(_ key: Key, _ response: APIResponseData, now: Date, generation: UInt64) {
        guard generation == self.generation else { return }
        remove(key)
        guard response.status == 200, let freshUntil = Self.freshUntil(response, now: now) else { return }
        guard freshUntil > now || response.header("etag") != nil else { return }
        let size = response.body.count + response.headers.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard size <= byteLimit, entryLimit > 0 else { return }
        uses += 1
        entries[key] = Entry(response: response, freshUntil: freshUntil, lastUse: uses, size: size)
        bytes += size
        while entries.count > entryLimit || bytes > byteLimit {
            guard let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key else { break }
            remove(oldest)
        }
    }

    /// A 304 for a stored answer: its fields update the stored ones (RFC 9111 §4.3.4) and the
    /// stored body answers. `nil` when nothing is stored (it was evicted meanwhile), or when the
    /// cache was cleared or the URL written since `generation` (the entry there now, if any, is
    /// another answer than the one the request revalidated).
    mutating func revalidated(_ key: Key, notModified: APIResponseData, now: Date, generation: UInt64) -> APIResponseData? {
        guard generation == self.generation, var entry = entries[key] else { return nil }
        entry.response.headers.merge(notModified.headers.filter { $0.key != "content-length" }) { _, new in new }
        guard let freshUntil = Self.freshUntil(entry.response, now: now) else {
            remove(key)
            return entry.response
        }
        uses += 1
        entry.freshUntil = freshUntil
        entry.lastUse = uses
        entries[key] = entry
        return entry.response
    }

    /// Drops every entry for `url`, whoever asked.
    mutating func invalidate(url: String) {
        generation &+= 1
        for key in entries.keys where key.url == url { remove(key) }
    }

    /// Drops every entry.
    mutating func clear() {
        generation &+= 1
        entries = [:]
        bytes = 0
    }

    private mutating func remove(_ key: Key) {
        if let old = entries.removeValue(forKey: key) { bytes -= old.size }
    }

    /// When the answer stops being fresh; `nil` when it must not be stored at all.
    static func freshUntil(_ response: APIResponseData, now: Date) -> Date? {
        if response.header("vary")?.contains("*") == true { return nil }
        var maxAge: TimeInterval = 0
        for directive in (response.header("cache-control") ?? "").split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let name = parts.first else { continue }
            switch name {
            case "no-store": return nil
            case "no-cache": return now
            case "max-age" where parts.count == 2: maxAge = TimeInterval(parts[1].trimmingCharacters(in: ["\""])) ?? 0
            default: continue
            }
        }
        let age = response.header("age").flatMap(TimeInterval.init) ?? 0
        return now.addingTimeInterval(max(0, maxAge - age))
    }
}

/// What identical GETs in flight share: the cache key, in one cache generation.
struct SharedGet: Hashable, Sendable {
    var key: ResponseCache.Key
    var generation: UInt64
}
