import Foundation

/// Reads the merged top-level sections into a ``Policy``, reporting every mistake to the sink.
struct PolicyDocumentReader {
    let sink: DiagnosticSink
    /// False when a file could not be parsed: then a section missing from the rest is not reported,
    /// since it may well be in the broken file.
    let complete: Bool
    /// Where `secretEnv` names are looked up.
    let environment: [String: String]

    /// Returns the policy when nothing was reported; the caller checks the sink either way.
    func read(sections: [String: [PolicyValue]]) -> Policy? {
        let listenerEntries = single("listeners", in: sections).map(readListeners) ?? []
        let listeners = listenerEntries.map(\.policy)
        if sections["listeners"] == nil && complete {
            sink.error(
                PolicyDiagnostic(file: "(policy)", line: nil, keyPath: "listeners", message: "missing: at least one listener is required"))
        }
        let limits = single("limits", in: sections).flatMap(readLimits) ?? LimitsPolicy()
        let upstream = single("upstream", in: sections).flatMap(readUpstream) ?? UpstreamPolicy()
        let accessLog = single("accessLog", in: sections).flatMap(readAccessLog) ?? AccessLogPolicy()
        let backends = merged("backends", in: sections, read: readBackend)
        let services = merged("services", in: sections) { readService($0, name: $1, backends: backends) }
        checkDuplicatePaths(services)
        let signatures = single("signatures", in: sections).flatMap(readSignatures) ?? SignaturePolicy()
        let apiKeys = single("apiKeys", in: sections).flatMap(readAPIKeys) ?? APIKeyPolicy()
        let clients = single("clients", in: sections).flatMap(readClients) ?? ClientsPolicy()
        let locatorValue = single("locator", in: sections)
        let locator = locatorValue.flatMap { readLocator($0, listeners: listeners.map(\.name)) }
        if let locator, let locatorValue { warnAboutShadowedRoutes(locator, at: locatorValue, services: services.values.map(\.policy)) }
        warnAboutClearTextKeys(listeners: listenerEntries, services: services.values.map(\.policy))
        let tiers = merged("tiers", in: sections) { readTier($0, name: $1, services: Set(services.keys)) }
        // Keys are checked against every tier named, even one with mistakes of its own, so that a
        // broken tier is reported once rather than again at each key that uses it.
        let tierNames = Set(tiers.keys).union(names("tiers", in: sections))
        let keys = merged("keys", in: sections, namesChecked: false) {
            KeyReader(value: $0, environment: environment).read(id: $1, services: Set(services.keys), tiers: tierNames)
        }
        let admin = single("admin", in: sections).flatMap(readAdmin)
        let clusterValue = single("cluster", in: sections)
        let cluster = clusterValue.flatMap(readCluster)
        let cacheValue = single("cache", in: sections)
        let cache = cacheValue.flatMap(readCache)
        if let cacheValue, let cache { checkCacheStore(cache, at: cacheValue, cluster: cluster) }
        let compression = single("compression", in: sections).flatMap(readCompression)
        let trustedProxies = single("trustedProxies", in: sections).flatMap { $0.addressRanges() } ?? []
        let jwt = single("jwt", in: sections).flatMap(readJWT) ?? JWTPolicy()
        let tracing = single("tracing", in: sections).flatMap { readTracing($0, listeners: listeners.map(\.name)) }
        checkIssuers(of: services, in: jwt)
        checkAccessKeys(keys)
        guard sink.diagnostics.isEmpty else { return nil }
        var policy = Policy(
            listeners: listeners, limits: limits, upstream: upstream, accessLog: accessLog,
            backends: backends.mapValues(\.policy), services: services.mapValues(\.policy),
            signatures: signatures, apiKeys: apiKeys, keys: keys.mapValues(\.policy), tiers: tiers.mapValues(\.policy))
        policy.clients = clients
        policy.locator = locator
        policy.admin = admin
        policy.cluster = cluster
        policy.cache = cache
        policy.compression = compression
        policy.trustedProxies = trustedProxies
        policy.jwt = jwt
        policy.tracing = tracing
        if let clusterValue, cluster != nil {
            checkSharedLimits(policy, at: clusterValue)
            guard sink.diagnostics.isEmpty else { return nil }
        }
        warnAboutWholeStoreShares(policy, tiers: tiers)
        return policy
    }

    /// Every issuer a service names is one the `jwt` section defines.
    private func checkIssuers(of services: [String: (policy: ServicePolicy, value: PolicyValue)], in jwt: JWTPolicy) {
        for (_, service) in services.sorted(by: { $0.key < $1.key }) {
            guard let names = service.policy.jwt?.issuers,
                let items = service.value.value(forKey: "jwt")?.value(forKey: "issuers")?.sequence()
            else { continue }
            for (name, item) in zip(names, items) where jwt.issuers[name] == nil {
                let known = jwt.issuers.keys.sorted().joined(separator: ", ")
                item.error("unknown issuer \"\(name)\"; expected one of: \(known.isEmpty ? "(no jwt.issuers defined)" : known)")
            }
        }
    }

    /// A SigV4 request names its key by access key id alone, so no two keys may share one.
    private func checkAccessKeys(_ keys: [String: (policy: ClientKeyPolicy, value: PolicyValue)]) {
        var seen: [String: String] = [:]
        for (id, key) in keys.sorted(by: { $0.key < $1.key }) {
            guard let accessKeyID = key.policy.accessKeyID else { continue }
            if let other = seen[accessKeyID] {
                key.value.value(forKey: "accessKeyId")?.error("access key id \(accessKeyID) is already key \(other)'s")
            }
            seen[accessKeyID] = id
        }
    }

    /// A key's share of the nonce store is capped at the whole store; a tier whose limits would
    /// let one key fill it protects other keys only through its rate limit.
    private func warnAboutWholeStoreShares(_ policy: Policy, tiers: [String: (policy: TierPolicy, value: PolicyValue)]) {
        let capacity = policy.signatures.nonceCacheSize
        for (name, tier) in tiers.sorted(by: { $0.key < $1.key }) {
            let keys = policy.keys.values.filter { $0.tier == name }
            guard let key = keys.max(by: { policy.nonceQuota(for: $0) < policy.nonceQuota(for: $1) }),
                policy.nonceQuota(for: key) >= capacity
            else { continue }
            let cause = tier.policy.nonceQuota == nil ? "its limits admit" : "its nonceQuota allows"
            tier.value.warning(
                "one key of this tier may hold the whole nonce store (\(cause) at least signatures.nonceCacheSize = \(capacity) live nonces); set a smaller nonceQuota or raise nonceCacheSize"
            )
        }
    }

    /// A section that may appear in one file only.
    private func single(_ key: String, in sections: [String: [PolicyValue]]) -> PolicyValue? {
        guard let values = sections[key], let first = values.first else { return nil }
        for again in values.dropFirst() {
            again.error("defined again; first defined in \(first.file)")
        }
        return first
    }

    /// A section of named entries that may be spread over several files. Names are checked here
    /// unless the entry's reader has rules of its own (`namesChecked: false`).
    private func merged<T>(
        _ key: String, in sections: [String: [PolicyValue]], namesChecked: Bool = true, read: (PolicyValue, String) -> T?
    ) -> [String: (policy: T, value: PolicyValue)] {
        var result: [String: (policy: T, value: PolicyValue)] = [:]
        for section in sections[key] ?? [] {
            for (name, value) in section.mappingEntries() ?? [] {
                if let existing = result[name] {
                    value.error("\(key.dropLast()) \"\(name)\" is already defined in \(existing.value.file)")
                    continue
                }
                if namesChecked && !Self.isValidName(name) {
                    value.error("name \"\(name)\" must be letters, digits, '-', '_' or '.'")
                }
                if let policy = read(value, name) { result[name] = (policy, value) }
            }
        }
        return result
    }

    /// The entry names of a merged section, read without reporting anything.
    private func names(_ key: String, in sections: [String: [PolicyValue]]) -> [String] {
        (sections[key] ?? []).flatMap { $0.mappingKeys() }
    }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty
            && name.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) && $0.isASCII || "-_.".unicodeScalars.contains($0) }
    }

    /// An `apiKey` service sends its secret with every request: on a plain-HTTP listener that
    /// other machines can reach, anyone on the path can read it.
    private func warnAboutClearTextKeys(listeners: [(policy: ListenerPolicy, value: PolicyValue)], services: [ServicePolicy]) {
        guard services.contains(where: { $0.auth.contains(.apiKey) }) else { return }
        for (listener, value) in listeners where listener.tls == nil {
            let address = listener.address
            guard !["::1", "localhost"].contains(address) && !address.hasPrefix("127.") else { continue }
            value.warning(
                "plain HTTP on \(address) while services use auth: apiKey, whose secrets would cross the network in clear; add tls")
        }
    }

    // MARK: Sections

    /// The listeners, each with the policy value it was read from (for later diagnostics).
    private func readListeners(_ value: PolicyValue) -> [(policy: ListenerPolicy, value: PolicyValue)] {
        guard let items = value.sequence() else { return [] }
        if items.isEmpty { value.error("expected at least one listener") }
        var listeners: [(policy: ListenerPolicy, value: PolicyValue)] = []
        var names: [String: PolicyValue] = [:]
        var endpoints: [String: PolicyValue] = [:]
        for item in items {
            guard let fields = item.fields(known: ["name", "address", "port", "tls", "protocols"]) else { continue }
            let name = fields.required("name") { $0.nonEmptyString() }
            let address = fields.optional("address", default: "127.0.0.1") { $0.nonEmptyString() }
            let port = fields.required("port") { $0.int(in: 0...65535) }
            let tls = fields.optional("tls", readTLS)
            let protocols = fields.optional("protocols") { readProtocols($0, tls: fields["tls"] != nil) }
            if let name {
                if let first = names[name] {
                    item.error("listener name \"\(name)\" is already used at \(first.keyPath)")
                } else {
                    names[name] = item
                }
            }
            if let port, port != 0 {
                let endpoint = "\(address):\(port)"
                if let first = endpoints[endpoint] {
                    item.error("\(endpoint) is already used by \(first.keyPath)")
                } else {
                    endpoints[endpoint] = item
                }
            }
            if let name, let port {
                let listener = ListenerPolicy(name: name, address: address, port: port, tls: tls, protocols: protocols)
                listeners.append((listener, item))
            }
        }
        return listeners
    }

    /// A listener's `protocols`: `h2` needs TLS (ALPN), `h2c` needs its absence (prior knowledge).
    private func readProtocols(_ value: PolicyValue, tls: Bool) -> [ListenerProtocol]? {
        guard let items = value.sequence() else { return nil }
        if items.isEmpty {
            value.error("expected at least one of \(ListenerProtocol.allCases.map(\.rawValue).joined(separator: ", "))")
            return nil
        }
        var protocols: [ListenerProtocol] = []
        for item in items {
            guard let chosen = item.oneOf(ListenerProtocol.allCases) else { continue }
            if chosen == .h2 && !tls {
                item.error("h2 is agreed through TLS's ALPN and this listener has no tls: use h2c for HTTP/2 with prior knowledge")
            } else if chosen == .h2c && tls {
                item.error("h2c is HTTP/2 without TLS: on a tls listener, use h2")
            } else if protocols.contains(chosen) {
                item.error("\(chosen.rawValue) is listed twice")
            } else {
                protocols.append(chosen)
            }
        }
        return protocols.count == items.count ? protocols : nil
    }

    private func readTLS(_ value: PolicyValue) -> ListenerTLSPolicy? {
        let known = [
            "certificate", "privateKey", "certificates", "minVersion", "ciphers", "cipherSuites", "groups", "clientCertificates",
            "clientCA", "handshakeTimeout",
        ]
        guard let fields = value.fields(known: known) else { return nil }
        var certificates: [ListenerTLSPolicy.Certificate] = []
        let single = fields["certificate"] != nil || fields["privateKey"] != nil
        if single && fields["certificates"] != nil {
            value.error("give either certificate and privateKey, or a certificates list, not both")
        } else if single {
            let chain = fields.required("certificate", file)
            let key = fields.required("privateKey", file)
            if let chain, let key { certificates.append(.init(chain: chain, privateKey: key)) }
        } else if let list = fields.required("certificates", { $0.sequence() }) {
            if list.isEmpty { fields["certificates"]?.error("expected at least one certificate (the first is the default)") }
            for item in list {
                guard let entry = item.fields(known: ["certificate", "privateKey"]) else { continue }
                let chain = entry.required("certificate", file)
                let key = entry.required("privateKey", file)
                if let chain, let key { certificates.append(.init(chain: chain, privateKey: key)) }
            }
        }
        let origin = PolicyOrigin(file: value.file, line: value.line, keyPath: value.keyPath)
        var tls = ListenerTLSPolicy(certificates: certificates, origin: origin)
        tls.minimumVersion = fields.optional("minVersion", default: 12) { value -> Int? in
            switch value.string() {
            case "1.2": return 12
            case "1.3": return 13
            default:
                value.error("expected \"1.2\" or \"1.3\" (older versions are not offered), found \(value.describe())")
                return nil
            }
        }
        tls.ciphers = fields.optional("ciphers") { $0.nonEmptyString() }
        tls.cipherSuites = fields.optional("cipherSuites") { $0.nonEmptyString() }
        tls.groups = fields.optional("groups") { $0.nonEmptyString() }
        tls.clientCertificates = fields.optional("clientCertificates", default: .none) {
            $0.oneOf(ListenerTLSPolicy.ClientCertificates.allCases)
        }
        tls.clientCA = fields.optional("clientCA", file)
        if tls.clientCertificates != .none && tls.clientCA == nil {
            value.error(
                "clientCertificates: \(tls.clientCertificates.rawValue) needs clientCA, the CA file client certificates are checked against"
            )
        }
        tls.handshakeTimeout = fields.optional("handshakeTimeout", default: tls.handshakeTimeout) { $0.duration() }
        return tls
    }

    /// A file named by the policy, with where it was named.
    func file(_ value: PolicyValue) -> PolicyFile? {
        guard let path = value.filePath() else { return nil }
        return PolicyFile(path: path, origin: PolicyOrigin(file: value.file, line: value.line, keyPath: value.keyPath))
    }

    private func readLimits(_ value: PolicyValue) -> LimitsPolicy? {
        let known = [
            "maxBodyBytes", "maxHeadBytes", "maxHeaderCount", "headTimeout", "idleTimeout", "sendTimeout", "maxConnections",
            "maxConnectionsPerAddress", "minBodyRate", "authFailures", "http2",
        ]
        guard let fields = value.fields(known: known) else { return nil }
        var limits = LimitsPolicy()
        limits.maxBodyBytes = fields.optional("maxBodyBytes", default: limits.maxBodyBytes) { $0.byteCount() }
        limits.maxHeadBytes = fields.optional("maxHeadBytes", default: limits.maxHeadBytes) { value in
            guard let bytes = value.byteCount() else { return nil }
            guard bytes >= 1024 else {
                value.error("expected at least 1024 bytes (a request line and a few fields), found \(bytes)")
                return nil
            }
            return bytes
        }
        limits.maxHeaderCount = fields.optional("maxHeaderCount", default: limits.maxHeaderCount) { $0.int(in: 1...10_000) }
        limits.headTimeout = fields.optional("headTimeout", default: limits.headTimeout) { $0.duration() }
        limits.idleTimeout = fields.optional("idleTimeout", default: limits.idleTimeout) { $0.duration() }
        limits.sendTimeout = fields.optional("sendTimeout", default: limits.sendTimeout) { $0.duration() }
        limits.maxConnections = fields.optional("maxConnections", default: limits.maxConnections) { $0.int(in: 1...10_000_000) }
        limits.maxConnectionsPerAddress = fields.optional("maxConnectionsPerAddress", default: limits.maxConnectionsPerAddress) {
            $0.int(in: 1...10_000_000)
        }
        limits.minBodyRate = fields.optional("minBodyRate", default: limits.minBodyRate) { $0.byteCount(allowingZero: true) }
        limits.authFailures = fields.optional("authFailures", default: limits.authFailures) { value -> RateLimitPolicy?? in
            value.isWord("off") ? .some(nil) : readRateLimit(value).map { .some($0) }
        }
        limits.http2 = fields.optional("http2", default: limits.http2, readHTTP2Limits)
        return limits
    }

    private func readHTTP2Limits(_ value: PolicyValue) -> HTTP2LimitsPolicy? {
        let known = [
            "maxConcurrentStreams", "maxHeaderListSize", "headerTableSize", "initialWindowSize", "connectionWindowSize",
            "maxResets", "maxControlFrames", "maxWindowUpdates", "floodWindow",
        ]
        guard let fields = value.fields(known: known) else { return nil }
        var limits = HTTP2LimitsPolicy()
        // RFC 9113 §6.5.2 and §6.9.1: windows up to 2^31-1; a table and a list within what a 32-bit setting holds.
        let window = 65535...2_147_483_647
        limits.maxConcurrentStreams = fields.optional("maxConcurrentStreams", default: limits.maxConcurrentStreams) {
            $0.int(in: 1...10_000)
        }
        limits.maxHeaderListSize = fields.optional("maxHeaderListSize", default: limits.maxHeaderListSize) { value in
            guard let bytes = value.byteCount() else { return nil }
            guard bytes >= 1024 && bytes <= 1024 * 1024 else {
                value.error("expected 1 KiB to 1 MiB, found \(bytes) bytes")
                return nil
            }
            return bytes
        }
        limits.headerTableSize = fields.optional("headerTableSize", default: limits.headerTableSize) { value in
            guard let bytes = value.byteCount(allowingZero: true) else { return nil }
            guard bytes <= 65536 else {
                value.error("expected at most 64 KiB, found \(bytes) bytes")
                return nil
            }
            return bytes
        }
        for (key, path) in [("initialWindowSize", \HTTP2LimitsPolicy.initialWindowSize), ("connectionWindowSize", \.connectionWindowSize)] {
            limits[keyPath: path] = fields.optional(key, default: limits[keyPath: path]) { value in
                guard let bytes = value.byteCount() else { return nil }
                guard window.contains(bytes) else {
                    value.error("expected 65535 to 2147483647 bytes (RFC 9113 §6.9.2), found \(bytes)")
                    return nil
                }
                return bytes
            }
        }
        limits.maxResets = fields.optional("maxResets", default: limits.maxResets) { $0.int(in: 1...1_000_000) }
        limits.maxControlFrames = fields.optional("maxControlFrames", default: limits.maxControlFrames) { $0.int(in: 1...1_000_000) }
        limits.maxWindowUpdates = fields.optional("maxWindowUpdates", default: limits.maxWindowUpdates) {
            $0.int(in: 1...10_000_000)
        }
        limits.floodWindow = fields.optional("floodWindow", default: limits.floodWindow) { $0.duration() }
        return limits
    }

    private func readUpstream(_ value: PolicyValue) -> UpstreamPolicy? {
        let known = ["threads", "maxConnectionsPerHost", "maxIdleConnections", "idleConnectionTimeout"]
        guard let fields = value.fields(known: known) else { return nil }
        var upstream = UpstreamPolicy()
        upstream.threads = fields.optional("threads", default: upstream.threads) { $0.int(in: 1...64) }
        upstream.maxConnectionsPerHost = fields.optional("maxConnectionsPerHost", default: upstream.maxConnectionsPerHost) {
            $0.int(in: 1...100_000)
        }
        upstream.maxIdleConnections = fields.optional("maxIdleConnections", default: upstream.maxIdleConnections) {
            $0.int(in: 1...100_000)
        }
        upstream.idleConnectionTimeout = fields.optional("idleConnectionTimeout", default: upstream.idleConnectionTimeout) {
            $0.duration()
        }
        return upstream
    }

    private func readAccessLog(_ value: PolicyValue) -> AccessLogPolicy? {
        guard let fields = value.fields(known: ["enabled", "format"]) else { return nil }
        var accessLog = AccessLogPolicy()
        accessLog.enabled = fields.optional("enabled", default: true) { $0.bool() }
        accessLog.format = fields.optional("format", default: .json) { $0.oneOf(AccessLogFormat.allCases) }
        return accessLog
    }

    private func readSignatures(_ value: PolicyValue) -> SignaturePolicy? {
        let known = [
            "maxClockSkew", "requireNonce", "label", "requiredComponents", "nonceCacheSize", "defaultNonceQuota", "maxComponents",
            "maxBaseBytes",
        ]
        guard let fields = value.fields(known: known) else { return nil }
        var policy = SignaturePolicy()
        policy.maxClockSkew = fields.optional("maxClockSkew", default: policy.maxClockSkew) { $0.duration() }
        policy.requireNonce = fields.optional("requireNonce", default: policy.requireNonce) { $0.bool() }
        policy.label = fields.optional("label") { value -> String? in
            guard let label = value.nonEmptyString() else { return nil }
            guard SignatureLabel.isValid(label) else {
                value.error(
                    "expected a structured-field key (lowercase letter or '*', then lowercase letters, digits, '_-.*'), found \"\(label)\"")
                return nil
            }
            return label
        }
        policy.requiredComponents = fields.optional("requiredComponents", default: policy.requiredComponents) { value in
            guard let items = value.sequence() else { return nil }
            return items.compactMap { item -> String? in
                guard let name = item.nonEmptyString() else { return nil }
                guard name == name.lowercased(), !name.contains(" "), !name.contains("\"") else {
                    item.error("expected a lowercase component name such as @method or content-type, found \"\(name)\"")
                    return nil
                }
                return name
            }
        }
        policy.nonceCacheSize = fields.optional("nonceCacheSize", default: policy.nonceCacheSize) { $0.int(in: 16...100_000_000) }
        policy.defaultNonceQuota = fields.optional("defaultNonceQuota") { $0.int(in: 1...100_000_000) }
        policy.maxComponents = fields.optional("maxComponents", default: policy.maxComponents) { $0.int(in: 1...1024) }
        policy.maxBaseBytes = fields.optional("maxBaseBytes", default: policy.maxBaseBytes) { value in
            guard let bytes = value.byteCount() else { return nil }
            guard (1024...1024 * 1024).contains(bytes) else {
                value.error("expected between 1024 bytes (1KiB) and 1MiB, found \(bytes)")
                return nil
            }
            return bytes
        }
        return policy
    }

    private func readAPIKeys(_ value: PolicyValue) -> APIKeyPolicy? {
        guard let fields = value.fields(known: ["header"]) else { return nil }
        var policy = APIKeyPolicy()
        policy.header = fields.optional("header", default: policy.header) { value -> String? in
            guard let header = value.nonEmptyString() else { return nil }
            guard header.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) else {
                value.error("expected a header field name such as X-API-Key, found \"\(header)\"")
                return nil
            }
            return header
        }
        return policy
    }

    private func readService(
        _ value: PolicyValue, name: String, backends: [String: (policy: BackendPolicy, value: PolicyValue)]
    ) -> (ServicePolicy)? {
        let known = [
            "path", "host", "auth", "versions", "default", "addressRateLimit", "allowEncodedSlashes", "compatibility",
            "minimumClientVersion", "missingClientVersion", "cache", "compression", "allowFrom", "denyFrom", "cors", "jwt", "sigv4",
            "websocket", "limits", "heartbeat",
        ]
        guard let fields = value.fields(known: known) else { return nil }
        let path = fields.required("path", readServicePath)
        let host = fields.optional("host") { $0.nonEmptyString()?.lowercased() }
        let auth = fields.optional("auth", default: [], readAuth)
        let (jwt, sigv4) = readSchemeSettings(fields, auth: auth, service: name)
        var versions: [Int: VersionPolicy] = [:]
        if let versionsValue = fields.required("versions", { $0.mappingEntries() }) {
            if versionsValue.isEmpty { fields["versions"]?.error("expected at least one version") }
            for (key, versionValue) in versionsValue {
                guard let number = Int(key.hasPrefix("v") ? String(key.dropFirst()) : key), number >= 1 else {
                    versionValue.error("version \"\(key)\" must be a positive integer such as 1 or 2")
                    continue
                }
                if versions[number] != nil {
                    versionValue.error("version \(number) is defined twice")
                    continue
                }
                if let version = readVersion(versionValue, backends: backends) { versions[number] = version }
            }
        }
        var defaultVersion = DefaultVersion.latest
        if let defaultValue = fields["default"] {
            let text = defaultValue.string()
            if text == "latest" {
                defaultVersion = .latest
            } else if let text, let number = Int(text), versions[number] != nil {
                defaultVersion = .version(number)
            } else if text != nil {
                let known = versions.keys.sorted().map(String.init).joined(separator: ", ")
                defaultValue.error("expected \"latest\" or one of this service's versions (\(known)), found \(defaultValue.describe())")
            }
        }
        let addressRateLimit = fields.optional("addressRateLimit", readRateLimit)
        let allowEncodedSlashes = fields.optional("allowEncodedSlashes", default: false) { $0.bool() }
        // Token-admitted requests have no key, so they do draw from it.
        if addressRateLimit != nil, !auth.isEmpty, !auth.contains(.jwt), let limitValue = fields["addressRateLimit"] {
            let schemes = auth.map(\.rawValue).joined(separator: ", ")
            limitValue.warning("applies to unauthenticated requests only; with auth: \(schemes), the keys' tiers limit this service")
        }
        let active = readActiveVersioning(fields, versions: versions, defaultVersion: defaultVersion)
        guard let path else { return nil }
        var service = ServicePolicy(
            name: name, path: path, host: host, versions: versions, defaultVersion: defaultVersion, auth: auth,
            addressRateLimit: addressRateLimit, allowEncodedSlashes: allowEncodedSlashes)
        service.compatibility = active.buckets
        service.minimumClientVersion = active.minimum
        service.missingClientVersion = active.missing
        service.cache = fields.optional("cache", readServiceCache)
        service.compression = fields.optional("compression", readServiceCompression)
        service.addresses = fields.addressList()
        service.cors = fields.optional("cors", readCORS)
        service.jwt = jwt
        service.sigv4 = sigv4
        service.websocket = fields.optional("websocket", default: false) { $0.bool() }
        service.streams = fields.optional("limits", default: ServiceStreamLimits(), readStreamLimits)
        service.heartbeat = fields.optional("heartbeat") { $0.duration() }
        if service.websocket, !versions.values.contains(where: { if case .proxy = $0.handler { true } else { false } }),
            let value = fields["websocket"]
        {
            value.warning("no version of this service is proxied: only a proxied version passes a WebSocket upgrade on")
        }
        return service
    }

    /// A service's `limits`: `{ maxUpgraded, streamIdleTimeout, streamMaxLifetime }`.
    private func readStreamLimits(_ value: PolicyValue) -> ServiceStreamLimits? {
        guard let fields = value.fields(known: ["maxUpgraded", "streamIdleTimeout", "streamMaxLifetime"]) else { return nil }
        return ServiceStreamLimits(
            maxUpgraded: fields.optional("maxUpgraded") { $0.int(in: 0...1_000_000) },
            idleTimeout: fields.optional("streamIdleTimeout") { $0.duration() },
            maxLifetime: fields.optional("streamMaxLifetime") { $0.duration() })
    }

    private func readServicePath(_ value: PolicyValue) -> String? {
        guard let path = value.nonEmptyString() else { return nil }
        let expected = "expected a path such as /api/quotes or /api/{version}/quotes"
        guard path.hasPrefix("/"), path == "/" || !path.hasSuffix("/"), !path.contains("?"), !path.contains("#") else {
            value.error("\(expected) (starting with '/', no trailing '/', no query), found \"\(path)\"")
            return nil
        }
        guard let template = PathTemplate(path) else {
            value.error("\(expected): segments must be non-empty, not '.' or '..', with at most one {version}; found \"\(path)\"")
            return nil
        }
        _ = template
        return path
    }

    private func readVersion(
        _ value: PolicyValue, backends: [String: (policy: BackendPolicy, value: PolicyValue)]
    ) -> VersionPolicy? {
        guard let fields = value.fields(known: ["proxy", "facade", "code", "deprecation", "input", "output", "cache"]) else { return nil }
        let deprecation = fields.optional("deprecation", Self.deprecationDate)
        let input = fields.optional("input", Self.mediaType)
        let output = fields.optional("output", Self.mediaType)
        let handlers = ["proxy", "facade", "code"].filter { fields[$0] != nil }
        guard handlers.count == 1 else {
            value.error(
                handlers.isEmpty
                    ? "expected a handler: proxy, facade or code" : "expected one handler, found \(handlers.joined(separator: " and "))")
            return nil
        }
        let handler: HandlerPolicy?
        switch handlers[0] {
        case "facade": handler = fields["facade"].flatMap { readFacade($0, backends: backends) }.map(HandlerPolicy.facade)
        case "code": handler = fields["code"].flatMap { readCodeHandler($0, backends: backends) }.map(HandlerPolicy.code)
        default: handler = fields["proxy"].flatMap { readProxy($0, backends: backends) }.map(HandlerPolicy.proxy)
        }
        guard let handler else { return nil }
        var version = VersionPolicy(handler: handler)
        version.deprecation = deprecation
        if let input { version.input = input }
        if let output { version.output = output }
        version.cache = fields.optional("cache", readServiceCache)
        return version
    }

    private func readProxy(_ proxyValue: PolicyValue, backends: [String: (policy: BackendPolicy, value: PolicyValue)]) -> ProxyPolicy? {
        guard let proxy = proxyValue.fields(known: ["backend", "rewrite"]) else { return nil }
        let backend = proxy.required("backend") { $0.nonEmptyString() }
        let rewrite = proxy.optional("rewrite") { v -> String? in
            guard let text = v.string() else { return nil }
            guard text.hasPrefix("/"), !text.contains("?"), !text.contains("#") else {
                v.error("expected a path starting with '/' and without query, found \"\(text)\"")
                return nil
            }
            return text.count > 1 && text.hasSuffix("/") ? String(text.dropLast()) : text
        }
        if let backend, backends[backend] == nil, let backendValue = proxy["backend"] {
            let known = backends.keys.sorted().joined(separator: ", ")
            backendValue.error("unknown backend \"\(backend)\"; expected one of: \(known.isEmpty ? "(no backends defined)" : known)")
            return nil
        }
        guard let backend else { return nil }
        return ProxyPolicy(backend: backend, rewrite: rewrite == "/" ? "" : rewrite)
    }

    private func checkDuplicatePaths(_ services: [String: (policy: ServicePolicy, value: PolicyValue)]) {
        var seen: [String: String] = [:]
        for name in services.keys.sorted() {
            let service = services[name]!
            guard let template = PathTemplate(service.policy.path) else { continue }
            let key = (service.policy.host ?? "*") + " " + template.canonical
            if let other = seen[key] {
                let pathValue = service.value.value(forKey: "path") ?? service.value
                pathValue.error("path \"\(service.policy.path)\" is already routed to service \"\(other)\"")
            } else {
                seen[key] = name
            }
        }
    }
}
