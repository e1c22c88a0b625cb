extension PolicyDocumentReader {
    /// `cache: { maxBytes, maxObjectBytes, store: memory | redis, maxWaiters, waitTimeout }`.
    func readCache(_ value: PolicyValue) -> CachePolicy? {
        guard let fields = value.fields(known: ["maxBytes", "maxObjectBytes", "store", "maxWaiters", "waitTimeout"]) else { return nil }
        var cache = CachePolicy()
        cache.maxBytes = fields.optional("maxBytes", default: cache.maxBytes) { $0.byteCount() }
        cache.maxObjectBytes = fields.optional("maxObjectBytes", default: cache.maxObjectBytes) { $0.byteCount() }
        cache.store = fields.optional("store", default: .memory) { $0.oneOf(CacheStoreKind.allCases) }
        cache.maxWaiters = fields.optional("maxWaiters", default: cache.maxWaiters) { $0.int(in: 0...1_000_000) }
        cache.waitTimeout = fields.optional("waitTimeout", default: cache.waitTimeout) { $0.duration() }
        if cache.maxObjectBytes > cache.maxBytes, let objectValue = fields["maxObjectBytes"] ?? fields["maxBytes"] {
            objectValue.error("maxObjectBytes (\(cache.maxObjectBytes)) must not exceed maxBytes (\(cache.maxBytes))")
            return nil
        }
        return cache
    }

    /// `store: redis` shares entries through the fleet's Redis, so it needs `cluster`.
    func checkCacheStore(_ cache: CachePolicy, at value: PolicyValue, cluster: ClusterPolicy?) {
        guard cache.store == .redis, cluster == nil else { return }
        (value.value(forKey: "store") ?? value).error("store: redis shares entries through the fleet's Redis; it needs a cluster section")
    }

    /// A service's or version's `cache`: `true`, `false`, or `{ enabled, defaultTTL, sameForEveryKey,
    /// staleWhileRevalidate, staleIfError }`.
    func readServiceCache(_ value: PolicyValue) -> ServiceCachePolicy? {
        if value.isWord("true") { return ServiceCachePolicy() }
        if value.isWord("false") { return ServiceCachePolicy(enabled: false) }
        let known = ["enabled", "defaultTTL", "sameForEveryKey", "staleWhileRevalidate", "staleIfError"]
        guard let fields = value.fields(known: known) else { return nil }
        return ServiceCachePolicy(
            enabled: fields.optional("enabled", default: true) { $0.bool() },
            defaultTTL: fields.optional("defaultTTL") { $0.duration() },
            sameForEveryKey: fields.optional("sameForEveryKey", default: false) { $0.bool() },
            staleWhileRevalidate: fields.optional("staleWhileRevalidate") { $0.duration() },
            staleIfError: fields.optional("staleIfError") { $0.duration() })
    }
}
