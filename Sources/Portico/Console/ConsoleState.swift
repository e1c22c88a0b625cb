import Foundation
import NIOCore
import PorticoPolicy
import PorticoRedis
import Synchronization

/// `GET /admin/console`: everything the console page draws, in one answer it reads every two
/// seconds. Like `/admin/policy` it holds no secret: keys by id, tier and status; the Redis
/// password not at all; certificates by file and expiry.
struct ConsoleState: Encodable {
    struct Gateway: Encodable {
        let generation: UInt64
        let hash: String
        let loadedAt: String
        let startedAt: String?
        let uptimeSeconds: Int
        let ready: Bool
        let draining: Bool
        let listeners: [Listener]
    }

    struct Listener: Encodable {
        let name: String
        /// Where it is bound (the policy's address and the port it got).
        let address: String
        let protocols: [String]
        let tls: Bool
        let certificates: [Certificate]
    }

    /// A certificate a listener serves now: its file, and when the loaded certificate expires.
    struct Certificate: Encodable {
        let file: String
        let notAfter: String?
        let daysLeft: Int?
    }

    struct Service: Encodable {
        let name: String
        let path: String
        let host: String?
        let auth: String
        let defaultVersion: String
        let minimumClientVersion: String?
        let versions: [Version]
        let buckets: [Bucket]
    }

    struct Version: Encodable {
        let version: Int
        let handler: String
        /// A facade's sources and what each does; nil for other handlers.
        let sources: [Source]?
        /// What a facade's sources did since start; nil for other handlers.
        let facade: FacadeTallies.Counts?
    }

    struct Source: Encodable {
        let name: String
        /// `active`, `fallback`, `shadow`, `aggregate` or `unused`.
        let role: String
        let active: Bool
    }

    /// A compatibility bucket as a range of app versions the page can draw: its bounds (nil: open)
    /// and whether each is included.
    struct Bucket: Encodable {
        let platforms: [String]
        let from: String?
        let fromInclusive: Bool
        let to: String?
        let toInclusive: Bool
        let version: Int
        let text: String
    }

    struct Traffic: Encodable {
        let slotSeconds: Int
        let slots: Int
        let series: [TrafficHistory.SeriesView]
    }

    struct Limits: Encodable {
        /// Refusals since start, by kind.
        let refusals: [String: Int]
        /// The in-process buckets with the fewest requests left (none in fleet mode: Redis holds them).
        let nearest: [BucketLevel]
        /// Whether the buckets live in the fleet's Redis.
        let shared: Bool
    }

    struct BucketLevel: Encodable {
        let scope: String
        let name: String
        /// The service a tier's bucket is for (a key has one per service); nil for a backend's.
        let service: String?
        /// The key id for a tier's bucket; empty for a backend's.
        let subject: String
        /// Requests that would be admitted now.
        let remaining: Int64
        let burst: Int64
    }

    struct Backend: Encodable {
        let name: String
        /// Requests in flight: proxied requests and fetches (those its concurrency cap counts, with one).
        let inFlight: Int
        /// Failed attempts (connect failures, resets, timeouts, 5xx) since start.
        let errors: Int
        let retries: Int
        /// Each target now, as `/admin/backends` gives it.
        let targets: [BackendsReport.Target]
    }

    struct Key: Encodable {
        let id: String
        let status: String
        let tier: String?
        let services: [String]
        let rotating: Bool
        /// When the previous secret stops being accepted, for a key being rotated.
        let previousSecretUntil: String?
    }

    struct Fleet: Encodable {
        let redis: String
        let database: Int
        /// Each event loop's breaker: `closed`, `open` or `half-open`.
        let breakers: [String]
        let onFailure: [String: String]
    }

    let gateway: Gateway
    let services: [Service]
    let traffic: Traffic
    let limits: Limits
    let backends: [Backend]
    let keys: [Key]
    let fleet: Fleet?
    let problems: [RecentProblems.Entry]

    /// The most tier buckets one answer looks at for ``Limits/nearest``.
    static let maxBucketLooks = 10_000

    /// Reads it all now. Only the Redis breakers' states take a hop to the event loops.
    static func read(_ portico: Portico.Gateway) async -> ConsoleState {
        let compiled = portico.store.current
        let policy = compiled.snapshot.policy
        let revision = portico.store.revision
        let now = Date()
        let startedAt = portico.startedAt

        let bound = Dictionary(portico.listenerStates.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let listeners = compiled.snapshot.listeners.map { listener in
            let state = bound[listener.name]
            let files = listener.tls?.certificates.map { URL(fileURLWithPath: $0.chain.path).lastPathComponent } ?? []
            let certificates = files.enumerated().map { index, file in
                let seconds = state.flatMap { index < $0.certificateSecondsLeft.count ? $0.certificateSecondsLeft[index] : nil }
                return Certificate(
                    file: file, notAfter: seconds.map { now.addingTimeInterval(TimeInterval($0)).adminTimestamp },
                    daysLeft: seconds.map { Int((Double($0) / 86400).rounded(.down)) })
            }
            return Listener(
                name: listener.name, address: state?.address ?? "\(listener.address):\(listener.port)",
                protocols: listener.protocols.map(\.rawValue), tls: listener.tls != nil, certificates: certificates)
        }
        let gateway = Gateway(
            generation: revision.generation, hash: revision.contentHash, loadedAt: revision.loadedAt.adminTimestamp,
            startedAt: startedAt?.adminTimestamp, uptimeSeconds: startedAt.map { max(0, Int(now.timeIntervalSince($0))) } ?? 0,
            ready: portico.isReady, draining: portico.isDraining, listeners: listeners)

        let services = policy.services.keys.sorted().compactMap { name in
            policy.services[name].map { service(name, $0, facades: portico.metrics.facades) }
        }

        var nearest: [BucketLevel] = []
        if portico.fleet == nil {
            let limiter = portico.rateLimiter
            let at = limiter.now
            // Bounded: a policy of many keys costs each poll at most this many looks at the store.
            var looks = 0
            for rules in compiled.services {
                for (keyID, key) in policy.keys
                where key.status == .active && (key.services.contains(rules.name) || key.services.contains("*")) {
                    guard looks < Self.maxBucketLooks, let tier = key.tier, let limit = rules.tierLimits[tier] else { continue }
                    looks += 1
                    let key = RateLimitKey(scope: .tier, name: limit.name, service: rules.name, subject: keyID)
                    nearest.append(
                        level(
                            limiter.store.peek(key, limit: limit.gcra, now: at), scope: "tier", name: limit.name, service: rules.name,
                            subject: keyID, limit: limit))
                }
            }
            for name in compiled.backends.keys.sorted() {
                guard let backend = compiled.backends[name], let draw = RateLimiter.draw(backend: backend) else { continue }
                nearest.append(
                    level(
                        limiter.store.peek(draw.key, limit: draw.limit.gcra, now: at), scope: "backend", name: name, service: nil,
                        subject: "", limit: draw.limit))
            }
            nearest.sort { Double($0.remaining) / Double(max($0.burst, 1)) < Double($1.remaining) / Double(max($1.burst, 1)) }
            nearest = Array(nearest.prefix(10))
        }

        let report = BackendsReport(compiled).backends
        let backends = compiled.backends.keys.sorted().compactMap { name -> Backend? in
            guard let backend = compiled.backends[name], let targets = report[name]?.targets else { return nil }
            let inFlight =
                backend.maxConcurrent != nil
                ? portico.rateLimiter.concurrency.inFlight(name) : backend.retryState.requests.load(ordering: .relaxed)
            return Backend(
                name: name, inFlight: inFlight, errors: targets.reduce(0) { $0 + $1.failuresTotal },
                retries: report[name]?.retriesTotal ?? 0, targets: targets)
        }

        let keys = policy.keys.keys.sorted().compactMap { id -> Key? in
            guard let key = policy.keys[id] else { return nil }
            return Key(
                id: id, status: key.status.rawValue, tier: key.tier, services: key.services.sorted(), rotating: key.previousSecret != nil,
                previousSecretUntil: key.previousSecret == nil
                    ? nil : key.previousSecretExpires.map { Date(timeIntervalSince1970: TimeInterval($0)).adminTimestamp })
        }

        var fleet: Fleet?
        if let store = portico.fleet, let cluster = policy.cluster {
            let states = (try? await store.client.breakerStates().get()) ?? []
            fleet = Fleet(
                redis: cluster.redis.description, database: cluster.database,
                breakers: states.map {
                    switch $0 {
                    case .closed: "closed"
                    case .open: "open"
                    case .halfOpen: "half-open"
                    }
                },
                onFailure: ["limits": store.onFailure.limits.rawValue, "nonces": store.onFailure.nonces.rawValue])
        }

        return ConsoleState(
            gateway: gateway, services: services,
            traffic: Traffic(
                slotSeconds: TrafficHistory.slotSeconds, slots: TrafficHistory.slotCount, series: portico.metrics.traffic.snapshot()),
            limits: Limits(refusals: portico.metrics.refusalCounts, nearest: nearest, shared: portico.fleet != nil),
            backends: backends, keys: keys, fleet: fleet, problems: portico.metrics.recentProblems.entries)
    }

    private static func level(
        _ decision: RateLimitDecision, scope: String, name: String, service: String?, subject: String, limit: CompiledRateLimit
    ) -> BucketLevel {
        BucketLevel(
            scope: scope, name: name, service: service, subject: subject, remaining: decision.allowed ? decision.remaining + 1 : 0,
            burst: Int64(limit.gcra.burst))
    }

    private static func service(_ name: String, _ service: ServicePolicy, facades: FacadeTallies) -> Service {
        let versions = service.versions.keys.sorted().compactMap { number -> Version? in
            guard let version = service.versions[number] else { return nil }
            switch version.handler {
            case .proxy(let proxy):
                return Version(version: number, handler: "proxy \(proxy.backend)", sources: nil, facade: nil)
            case .code(let code):
                return Version(version: number, handler: "code \(code.name)", sources: nil, facade: nil)
            case .facade(let facade):
                let sources = facade.sources.map { source in
                    let role =
                        source.name == facade.active
                        ? "active"
                        : facade.fallback.contains(source.name)
                            ? "fallback"
                            : source.name == facade.shadow ? "shadow" : facade.aggregate.contains(source.name) ? "aggregate" : "unused"
                    return Source(name: source.name, role: role, active: source.name == facade.active)
                }
                let handler =
                    facade.active.map { "facade, from \($0)" } ?? "facade, aggregating \(facade.aggregate.joined(separator: " + "))"
                return Version(
                    version: number, handler: handler, sources: sources, facade: facades.counts(service: name, version: number))
            }
        }
        let buckets = service.compatibility.map { bucket in
            let platforms = bucket.platforms.isEmpty ? "" : " on " + bucket.platforms.joined(separator: ", ")
            return Bucket(
                platforms: bucket.platforms, from: bucket.clients.lower.map { "\($0.version)" },
                fromInclusive: bucket.clients.lower.map { if case .below = $0 { true } else { false } } ?? true,
                to: bucket.clients.upper.map { "\($0.version)" },
                toInclusive: bucket.clients.upper.map { if case .above = $0 { true } else { false } } ?? true,
                version: bucket.version, text: "\(bucket.clients)\(platforms) → v\(bucket.version)")
        }
        return Service(
            name: name, path: service.path, host: service.host, auth: service.authDescription,
            defaultVersion: service.defaultVersionName, minimumClientVersion: service.minimumClientVersion.map { "\($0)" },
            versions: versions, buckets: buckets)
    }
}
