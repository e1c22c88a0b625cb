import Logging
import NIOConcurrencyHelpers
import NIOCore
import PorticoRedis

/// The response cache's fleet side, through the fleet's Redis.
///
/// - **Shared entries** (`cache.store: redis`): a response one gateway stores is written to Redis
///   too (up to `maxObjectBytes`, for as long as it can serve), and a gateway that misses its own
///   memory asks Redis before the backend, so that every gateway serves the same stored version.
///   Redis keeps one variant per target and version (the last stored); the memory store in front
///   keeps several. When Redis fails (down, slow, breaker open) a lookup is a plain miss and a
///   store is dropped: requests go on from this gateway's memory and the backends.
/// - **Purges** reach every gateway: an unsafe request's invalidation and an operator's purge are
///   appended to a Redis stream that every gateway reads every half second and applies to its own
///   memory (whatever `store` says). A stream rather than pub/sub: a gateway that lost Redis for a
///   moment reads on from where it stopped instead of missing what was sent meanwhile.
///
/// Keys: `portico:c:<service><target><version>` (each part length-prefixed) for an entry,
/// `portico:cs:<service>` and `portico:ct:<tag>` for the sets a purge by service or tag reads,
/// `portico:cache:purges` for the stream.
final class FleetCache: Sendable {
    let client: RedisClient
    /// Whether entries are shared (`store: redis`), or only purges.
    let sharesEntries: Bool
    private let logger: Logger?

    static let purgeStream = "portico:cache:purges"
    /// The longest reply the fleet's connections take when entries are shared: entries larger
    /// (a `maxObjectBytes` raised by a reload past it) are not written, so that no gateway's
    /// decoder meets a reply it refuses, which would break the connection limits share.
    static let maxReplyBytes = 16 * 1024 * 1024
    /// How often the purge stream is read.
    static let listenInterval = TimeAmount.milliseconds(500)

    init(client: RedisClient, sharesEntries: Bool, logger: Logger?) {
        self.client = client
        self.sharesEntries = sharesEntries
        self.logger = logger
    }

    static func entryKey(_ key: CacheKey, version: Int) -> String {
        "portico:c:\(part(key.service))\(part(key.target))\(version)"
    }

    static func serviceSet(_ service: String) -> String { "portico:cs:\(part(service))" }
    static func tagSet(_ tag: String) -> String { "portico:ct:\(part(tag))" }
    private static func part(_ text: String) -> String { "\(text.utf8.count):\(text)" }

    // MARK: Entries

    /// The entry Redis holds for `request`'s target and version; nil when there is none, it is
    /// unreadable, or Redis fails (a miss, never an error). Completes on `eventLoop`.
    func fetch(_ request: CacheRequest, on eventLoop: any EventLoop) -> EventLoopFuture<CachedResponse?> {
        let command = RESPValue.command(["GET", Self.entryKey(request.key, version: request.version)])
        return client.send(command, on: eventLoop).map { reply -> CachedResponse? in
            guard case .bulkString(let bytes?) = reply else { return nil }
            return CachedResponse.decode(bytes, key: request.key, version: request.version)
        }.recover { _ in nil }
    }

    /// Writes `entry` for as long as it may serve: its remaining freshness, plus the longest of
    /// its stale windows and, when it has a validator to be revalidated by, an hour. Nothing is
    /// waited for: a failed write only means other gateways miss it.
    func store(_ entry: CachedResponse, now: Double, on eventLoop: any EventLoop) {
        guard entry.size + 64 * 1024 <= client.configuration.maxReplyBytes else { return }
        var seconds = entry.freshnessLifetime - entry.age(at: now)
        seconds += max(entry.staleWhileRevalidate, entry.staleIfError, entry.etag != nil || entry.lastModified != nil ? 3600 : 0)
        guard seconds >= 1 else { return }
        let key = Self.entryKey(entry.key, version: entry.version)
        let milliseconds = String(Int(seconds * 1000))
        let set = RESPValue.array([
            .bulkString(ByteBuffer(string: "SET")), .bulkString(ByteBuffer(string: key)), .bulkString(entry.encoded()),
            .bulkString(ByteBuffer(string: "PX")), .bulkString(ByteBuffer(string: milliseconds)),
        ])
        let expiry = String(Int(seconds.rounded(.up)))
        let logger = logger
        client.send(set, on: eventLoop).whenFailure { error in
            logger?.debug("the shared cache did not take an entry", metadata: ["error": .string("\(error)")])
        }
        // The sets a purge by service or tag reads; they live as long as their longest member.
        // (A script rather than `EXPIRE … GT`, which Redis before 7.0 does not know.)
        let membership = """
            redis.call('SADD', KEYS[1], ARGV[1])
            local ttl = redis.call('TTL', KEYS[1])
            if ttl < tonumber(ARGV[2]) then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
            return 1
            """
        for set in [Self.serviceSet(entry.key.service)] + entry.tags.map(Self.tagSet) {
            _ = client.send(.command(["EVAL", membership, "1", set, key, expiry]), on: eventLoop)
        }
    }

    // MARK: Purges

    /// Drops what `selector` names from Redis (the entries of a target's `versions`, of a
    /// service, of a tag, or of every service in `services`), and tells every gateway through the
    /// stream. The entries dropped from Redis, or the failure.
    func purge(
        _ selector: ResponseCache.PurgeSelector, versions: [Int], services: [String], on eventLoop: any EventLoop
    ) -> EventLoopFuture<Int> {
        announce(selector, on: eventLoop)
        guard sharesEntries else { return eventLoop.makeSucceededFuture(0) }
        let script = """
            local n = 0
            for _, set in ipairs(KEYS) do
              local members = redis.call('SMEMBERS', set)
              for _, member in ipairs(members) do n = n + redis.call('DEL', member) end
              redis.call('DEL', set)
            end
            for _, key in ipairs(ARGV) do n = n + redis.call('DEL', key) end
            return n
            """
        var sets: [String] = []
        var keys: [String] = []
        switch selector {
        case .target(let service, let target):
            keys = versions.map { Self.entryKey(CacheKey(service: service, target: target), version: $0) }
        case .service(let service): sets = [Self.serviceSet(service)]
        case .tag(let tag): sets = [Self.tagSet(tag)]
        case .all: sets = services.map(Self.serviceSet)
        }
        return client.send(.command(["EVAL", script, String(sets.count)] + sets + keys), on: eventLoop).flatMapThrowing { reply in
            guard let count = reply.integer else { throw RedisError.protocolViolation("unexpected reply to a purge: \(reply)") }
            return Int(count)
        }
    }

    /// Appends `selector` to the purge stream (its last thousand or so are kept).
    func announce(_ selector: ResponseCache.PurgeSelector, on eventLoop: any EventLoop) {
        let fields: [String]
        switch selector {
        case .target(let service, let target): fields = ["kind", "target", "service", service, "target", target]
        case .service(let service): fields = ["kind", "service", "service", service]
        case .tag(let tag): fields = ["kind", "tag", "tag", tag]
        case .all: fields = ["kind", "all"]
        }
        let logger = logger
        client.send(.command(["XADD", Self.purgeStream, "MAXLEN", "~", "1000", "*"] + fields), on: eventLoop).whenFailure { error in
            logger?.warning("a cache purge could not be told to the fleet", metadata: ["error": .string("\(error)")])
        }
    }

    /// Reads the purge stream from its end now on, every ``listenInterval``, on `eventLoop`, and
    /// hands each purge to `apply`. A failed read is tried again at the next interval, from the
    /// same place. Cancel the returned task to stop.
    func listen(on eventLoop: any EventLoop, apply: @escaping @Sendable (ResponseCache.PurgeSelector) -> Void) -> RepeatedTask {
        // Where the stream was read up to (only the loop's task touches it; the lock makes it Sendable).
        let position = NIOLockedValueBox<String?>(nil)
        let client = client
        return eventLoop.scheduleRepeatedAsyncTask(initialDelay: .zero, delay: Self.listenInterval) { task in
            guard let last = position.withLockedValue({ $0 }) else {
                // Where the stream ends now: what came before this gateway started is not its to apply.
                return client.send(.command(["XREVRANGE", Self.purgeStream, "+", "-", "COUNT", "1"]), on: eventLoop).map { reply in
                    position.withLockedValue { $0 = reply.array?.first?.array?.first?.string ?? "0-0" }
                }.recover { _ in }
            }
            let read = RESPValue.command(["XREAD", "COUNT", "100", "STREAMS", Self.purgeStream, last])
            return client.send(read, on: eventLoop).map { reply in
                // [[stream, [[id, [field, value, …]], …]]]
                for entry in reply.array?.first?.array?.dropFirst().first?.array ?? [] {
                    guard let parts = entry.array, parts.count == 2, let id = parts[0].string else { continue }
                    position.withLockedValue { $0 = id }
                    if let selector = Self.selector(parts[1].array?.compactMap(\.string) ?? []) { apply(selector) }
                }
            }.recover { _ in }
        }
    }

    static func selector(_ fields: [String]) -> ResponseCache.PurgeSelector? {
        var values: [String: String] = [:]
        for index in stride(from: 0, to: fields.count - 1, by: 2) { values[fields[index]] = fields[index + 1] }
        switch values["kind"] {
        case "target":
            guard let service = values["service"], let target = values["target"] else { return nil }
            return .target(service: service, target: target)
        case "service": return values["service"].map { .service($0) }
        case "tag": return values["tag"].map { .tag($0) }
        case "all": return .all
        default: return nil
        }
    }
}
