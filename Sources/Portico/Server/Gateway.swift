import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PorticoPolicy
import PorticoTLS
import PorticoUpstream

/// The gateway process's server: listeners, connection pipelines, the upstream client.
///
/// Start it with a compiled policy; it binds every listener of the policy (port `0` asks for an
/// ephemeral one, which ``boundPorts`` then reports), and serves until ``shutdown()``.
public final class Gateway: Sendable {
    public let store: PolicyStore
    /// The tracers of the policies compiled for this gateway (`tracing:`); the installed one's exports.
    let tracers: TracerRegistry
    private let group: any EventLoopGroup
    /// The loops connections run on (the admin API sends its fleet commands from one).
    var eventLoopGroup: any EventLoopGroup { group }
    private let upstream: any UpstreamClient
    /// Lives as long as the gateway, across policy reloads, like every piece of state that must
    /// outlast a snapshot.
    private let nonces: any NonceStore
    /// Rate-limit buckets and backend in-flight counts; like the nonces, they outlive reloads.
    public let rateLimiter: RateLimiter
    /// The response cache (RFC 9111) every listener shares; it outlives reloads.
    public let cache: ResponseCache
    /// Facade source fetches in flight, merged across every listener's requests.
    let sourceFetches = FetchCoalescer()
    /// WebSocket streams open on every listener, against their services' and keys' `maxUpgraded`.
    let streams = OpenStreams()
    private let upgradeTLS = UpstreamUpgrade.TLSContexts()
    /// Token issuers' keys, shared by every listener and kept across reloads.
    let jwtKeys: JWTKeySets
    /// What `/metrics` reports; each compiled policy's requests count into it.
    public let metrics: GatewayMetrics
    /// Fleet mode's Redis, made at start from the policy's `cluster` section (`nil` without one):
    /// owned here for its start-up check and its close; requests reach it through `limits`.
    let fleet: FleetStore?
    /// Where requests draw from their limits and record their nonces: the fleet's store in fleet
    /// mode (with this gateway's as its fallback), this gateway's otherwise.
    private let limits: any LimitStore
    /// The access log's dedicated writer, if the gateway was given one (`portico serve`).
    private let accessLogWriter: AccessLogWriter?
    private let logger: Logger
    /// Handlers written in Swift, by the name `code` versions select them with.
    private let codeHandlers: [String: any CodeHandler]
    /// Asks the backends' targets for their health, as their policies' `healthCheck`s say.
    private let healthChecker: HealthChecker
    /// Resolves the targets' host names to all their addresses, as `resolveEvery` says.
    private let addressRefresher: AddressRefresher
    private let state = NIOLockedValueBox(RunState())

    private struct RunState {
        var listeners: [(name: String, channel: any Channel, connections: ListenerConnections)] = []
        /// The TLS context each TLS listener hands to new connections.
        var tlsStores: [String: TLSContextStore] = [:]
        var connections: [ObjectIdentifier: any Channel] = [:]
        var accepted = 0
        var started = false
        /// When ``start()`` finished, for the console's uptime.
        var startedAt: Date?
        var shutDown = false
        /// Shutdown waits here for the last connection to close (resumed by its close).
        var drained: [CheckedContinuation<Void, Never>] = []
        /// The drain's time is up: a waiter that registers now returns at once.
        var drainOver = false
        /// Reads the fleet's cache purges (fleet mode).
        var purgeListener: RepeatedTask?
    }

    /// - Parameters:
    ///   - upstream: the client backends are called through; by default NIO for `http://` backends
    ///     and libcurl for `https://` ones (each backend's `client` may choose), sized by the
    ///     policy's `upstream` section, shut down with the gateway.
    ///   - nonces: where signature nonces are remembered; by default in memory, bounded by the
    ///     policy's `signatures.nonceCacheSize` (read at start: a reload does not resize it).
    ///   - rateLimiter: where rate-limit state lives; by default an ``InMemoryRateLimitStore``.
    ///   - accessLogWriter: where access-log lines go; without one, through `logger` (swift-log).
    ///   - contentHash: the policy files' hash (``PolicyRevision/contentHash``), when loaded from files.
    ///   - codeHandlers: handlers written in Swift (``CodeHandler``), by the name a `code` version gives.
    ///   - targets: the state of the backends' targets (ejections, health, requests in flight), and
    ///     the clock ejections are timed by (tests may pass their own).
    ///   - resolver: what the targets' host names are resolved with (tests may give the answers).
    ///   - cacheClock: the response cache's clock, seconds since 1970; by default the system's
    ///     (tests pass their own to age what is stored).
    public init(
        snapshot: PolicySnapshot, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        upstream: (any UpstreamClient)? = nil, nonces: (any NonceStore)? = nil, rateLimiter: RateLimiter = RateLimiter(),
        metrics: GatewayMetrics = GatewayMetrics(), accessLogWriter: AccessLogWriter? = nil, contentHash: String = "",
        logger: Logger = Logger(label: "portico"), codeHandlers: [String: any CodeHandler] = [:],
        targets: TargetRegistry = TargetRegistry(), resolver: any AddressResolver = SystemAddressResolver(),
        cacheClock: (@Sendable () -> Double)? = nil
    ) {
        self.codeHandlers = codeHandlers
        self.nonces = nonces ?? InMemoryNonceStore(capacity: snapshot.policy.signatures.nonceCacheSize)
        self.rateLimiter = rateLimiter
        self.metrics = metrics
        self.accessLogWriter = accessLogWriter
        let tracers = TracerRegistry(logger: logger) { [metrics] dropped in metrics.tracingSpansDropped(dropped) }
        self.tracers = tracers
        let store = PolicyStore(snapshot, contentHash: contentHash, metrics: metrics, targets: targets, tracers: tracers)
        self.store = store
        self.group = group
        self.upstream = upstream ?? RoutingUpstreamClient.gatewayDefault(sizedBy: snapshot.policy.upstream, group: group)
        self.logger = logger
        self.jwtKeys = JWTKeySets(loader: JWKSLoader(upstream: self.upstream, logger: logger))
        let healthChecker = HealthChecker(eventLoop: group.next(), upstream: self.upstream, logger: logger)
        self.healthChecker = healthChecker
        self.addressRefresher = AddressRefresher(
            store: store, resolver: resolver, eventLoop: group.next(), logger: logger, onRefresh: { healthChecker.update($0) })
        let cachePolicy = snapshot.policy.cache ?? CachePolicy()
        let sharesEntries = cachePolicy.store == .redis
        let fleet = snapshot.policy.cluster.map {
            FleetStore(
                $0, group: group, metrics: metrics, logger: logger,
                maxReplyBytes: sharesEntries ? max(FleetCache.maxReplyBytes, cachePolicy.maxObjectBytes + 64 * 1024) : 1024 * 1024)
        }
        let shared = fleet.map { FleetCache(client: $0.client, sharesEntries: sharesEntries, logger: logger) }
        self.cache = ResponseCache(clock: cacheClock ?? { Date().timeIntervalSince1970 }, metrics: metrics, shared: shared)
        let local = LocalLimitStore(rateLimiter: rateLimiter, nonces: self.nonces)
        self.fleet = fleet
        self.limits = fleet.map { FleetLimitStore(fleet: $0, local: local) } ?? local
    }

    /// Listener name → bound port, once ``start()`` has returned.
    public var boundPorts: [String: Int] {
        state.withLockedValue { state in
            Dictionary(
                uniqueKeysWithValues: state.listeners.compactMap { listener in
                    listener.channel.localAddress?.port.map { (listener.name, $0) }
                })
        }
    }

    /// What each listener is bound to and, for a TLS listener, the seconds left on each of the
    /// certificates it serves now (the last reload's), in the policy's order.
    var listenerStates: [(name: String, address: String, certificateSecondsLeft: [Int?])] {
        state.withLockedValue { state in
            state.listeners.map { listener in
                (
                    listener.name,
                    listener.channel.localAddress.map { address in
                        let host = address.ipAddress ?? "?"
                        return host.contains(":") ? "[\(host)]:\(address.port ?? 0)" : "\(host):\(address.port ?? 0)"
                    } ?? "",
                    state.tlsStores[listener.name]?.current.secondsUntilExpiry ?? []
                )
            }
        }
    }

    /// When ``start()`` finished; nil before.
    var startedAt: Date? { state.withLockedValue { $0.startedAt } }

    /// Client connections open now, on every listener.
    public var openConnections: Int { state.withLockedValue { $0.connections.count } }

    /// Connections each listener refused at accept since start, because it was at
    /// `limits.maxConnections`.
    public var refusedConnections: [String: Int] {
        state.withLockedValue { state in
            Dictionary(uniqueKeysWithValues: state.listeners.map { ($0.name, $0.connections.refusedCount) })
        }
    }

    /// Client connections accepted since start.
    public var acceptedConnections: Int { state.withLockedValue { $0.accepted } }

    /// Whether the gateway takes new work: its listeners are up and it is not shutting down
    /// (`/readyz`).
    public var isReady: Bool { state.withLockedValue { $0.started && !$0.shutDown } }

    /// Whether ``shutdown(gracePeriod:)`` has begun.
    public var isDraining: Bool { state.withLockedValue { $0.shutDown } }

    /// Binds every listener. Throws if one cannot be bound (those already bound are closed again),
    /// or a `PolicyError` naming the file when a TLS listener's certificate cannot be used.
    public func start() async throws {
        let snapshot = store.current.snapshot
        var accessLogger = logger
        accessLogger[metadataKey: "log"] = "access"
        let tlsStores = try ListenerTLS.contexts(for: snapshot).mapValues(TLSContextStore.init)
        _ = try LocatorSigning.key(for: snapshot)  // a locator key that cannot be read fails the start, naming its file
        if let error = fleet?.configurationError { throw error }  // rediss://'s caFile, likewise (read once, by the store)
        await addressRefresher.start()
        healthChecker.update(store.current)
        // Fleet purges are read only where something may be cached (read at start, like `store`).
        let caches =
            snapshot.policy.cache != nil
            || snapshot.policy.services.values.contains { $0.cache != nil || $0.versions.values.contains { $0.cache != nil } }
        if let shared = cache.shared, caches {
            let cache = self.cache
            let listening = shared.listen(on: group.next()) { cache.purge($0) }
            state.withLockedValue { $0.purgeListener = listening }
        }
        let limits = snapshot.limits
        var bound: [(name: String, channel: any Channel, connections: ListenerConnections)] = []
        do {
            for listener in snapshot.listeners {
                let tls = tlsStores[listener.name]
                var services = GatewayServices(
                    store: store, upstream: upstream, nonces: nonces, rateLimiter: rateLimiter, accessLogger: accessLogger,
                    scheme: tls == nil ? "http" : "https", listener: listener.name, accessLogWriter: accessLogWriter,
                    metrics: metrics, logger: logger, codeHandlers: codeHandlers, limits: self.limits, cache: cache)
                services.sourceFetches = sourceFetches
                services.jwtKeys = jwtKeys
                services.streams = streams
                services.upgradeTLS = upgradeTLS
                let connections = ListenerConnections(
                    listener: listener.name, limit: limits.maxConnections, perAddressLimit: limits.maxConnectionsPerAddress, logger: logger)
                let channel: any Channel
                do {
                    channel = try await bootstrap(
                        services: services, limits: limits, protocols: listener.protocols, tls: tls, connections: connections
                    )
                    .bind(host: listener.address, port: listener.port).get()
                } catch {
                    throw ListenerBindError(listener: listener, underlying: error)
                }
                bound.append((listener.name, channel, connections))
                logger.info("listening", metadata: ["listener": .string(listener.name), "address": .string("\(channel.localAddress!)")])
            }
        } catch {
            for listener in bound { try? await listener.channel.close() }
            // A gateway that did not start keeps nothing running.
            healthChecker.stop()
            addressRefresher.stop()
            throw error
        }
        state.withLockedValue {
            $0.listeners = bound
            $0.tlsStores = tlsStores
            $0.started = true
            $0.startedAt = Date()
        }
    }

    /// Reads every TLS listener's certificate and key files again (from `snapshot`, by default the
    /// current policy) and installs the new contexts: new connections get the new certificates,
    /// open ones keep theirs. All or nothing: if any listener's files are broken, nothing changes
    /// and the error names the file. Listeners are fixed at start; only their certificates change.
    public func reloadCertificates(from snapshot: PolicySnapshot? = nil) throws(PolicyError) {
        let stores = state.withLockedValue { $0.tlsStores }
        let contexts = try ListenerTLS.contexts(for: snapshot ?? store.current.snapshot, replacing: stores.mapValues(\.current))
        for (name, store) in stores {
            if let context = contexts[name] { store.replace(with: context) }
        }
    }

    /// Opens the files `snapshot` names that only the gateway can check, as a reload must before it
    /// installs anything: every TLS listener's certificates and keys (built into contexts, checked by
    /// OpenSSL, not installed; they inherit the session-ticket keys of the contexts in use, so
    /// sessions resume across a reload) and the locator's signing key. Every problem is reported,
    /// each naming its file and key path.
    func openFiles(for snapshot: PolicySnapshot) throws(PolicyError) -> [String: TLSContext] {
        var diagnostics: [PolicyDiagnostic] = []
        var contexts: [String: TLSContext] = [:]
        let stores = state.withLockedValue { $0.tlsStores }
        do throws(PolicyError) {
            contexts = try ListenerTLS.contexts(for: snapshot, replacing: stores.mapValues(\.current))
        } catch {
            diagnostics += error.diagnostics
        }
        do throws(PolicyError) {
            _ = try LocatorSigning.key(for: snapshot)
        } catch {
            diagnostics += error.diagnostics
        }
        if !diagnostics.isEmpty { throw PolicyError(diagnostics: diagnostics) }
        return contexts
    }

    /// Installs a new policy, all or nothing: its files are opened (``openFiles(for:)``) and the
    /// policy compiled first, and only then are the TLS contexts and the policy swapped in, so a
    /// policy whose certificate or locator key files are broken changes nothing. New requests read the new policy; those in flight finish on theirs; new
    /// connections get the new certificates, open ones keep theirs. State that outlives a reload
    /// (rate-limit buckets, nonces, backend in-flight counts, upstream pools) is the gateway's own
    /// and stays; so do WebSocket streams, but for those of a key revoked or removed. Listeners are fixed at start. Reloads are serialised by ``PolicyReloader``.
    public func install(_ snapshot: PolicySnapshot, contentHash: String) throws(PolicyError) -> PolicyRevision {
        let contexts = try openFiles(for: snapshot)
        let compiled = store.compile(snapshot)
        let stores = state.withLockedValue { $0.tlsStores }
        for (name, store) in stores {
            if let context = contexts[name] { store.replace(with: context) }
        }
        let revision = store.install(compiled, contentHash: contentHash)
        healthChecker.update(compiled)
        // A key the new policy revokes or drops keeps no stream open (closed with 1008).
        streams.closeRevoked(under: snapshot.policy)
        return revision
    }

    /// Client connections' receive buffers: NIO's adaptive sizes (from 2 KiB, growing while reads
    /// fill them) up to 16 KiB.
    static let receiveBuffers = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 16 * 1024)

    private func bootstrap(
        services: GatewayServices, limits: LimitsPolicy, protocols: [ListenerProtocol], tls: TLSContextStore?,
        connections: ListenerConnections
    ) -> ServerBootstrap {
        var connectionPipeline = ConnectionPipeline(services: services, limits: limits, protocols: protocols)
        connectionPipeline.listener = connections.listener
        return ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            // A connection keeps the buffer its reads last went into for as long as it lives (NIO
            // reuses it rather than allocating each read), so the size its reads grow to is what it
            // holds while idle: capped at 16 KiB (one TLS record) rather than NIO's 64 KiB, so that a
            // keep-alive connection that once carried a large body does not keep 64 KiB for it.
            .childChannelOption(.recvAllocator, value: Self.receiveBuffers)
            .childChannelInitializer { [self] channel in
                // Over the listener's or the address's limit: closed before any state is made for it.
                let address = ClientAddress.rateLimitSubject(channel.remoteAddress)
                guard connections.admit(address: address) else { return channel.close() }
                channel.closeFuture.whenComplete { _ in connections.release(address: address) }
                self.track(channel)
                return channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls {
                        guard let handler = TLSServerHandler(context: tls.current) else { throw TLSError.setupFailed }
                        try pipeline.addHandler(handler)
                    }
                    try connectionPipeline.configureAccepted(channel, tls: tls != nil)
                }
            }
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let accepted = state.withLockedValue { state -> Bool in
            guard !state.shutDown else { return false }
            state.connections[id] = channel
            state.accepted += 1
            return true
        }
        guard accepted else {
            channel.close(promise: nil)
            return
        }
        metrics.connectionOpened()
        channel.closeFuture.whenComplete { [state, metrics] _ in
            metrics.connectionClosed()
            let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
                state.connections.removeValue(forKey: id)
                guard state.connections.isEmpty else { return [] }
                defer { state.drained = [] }
                return state.drained
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Stops listening, lets requests in flight finish (up to `gracePeriod`), then closes what is
    /// left and stops the upstream client.
    ///
    /// Idle keep-alive connections close at once; a connection with a request in flight closes as
    /// soon as its response has ended (the gateway handler does this on
    /// `ChannelShouldQuiesceEvent`), so a rolling restart loses no request that was already accepted.
    public func shutdown(gracePeriod: Duration = .seconds(10)) async {
        let (listeners, connections) = state.withLockedValue { state in
            state.shutDown = true
            return (state.listeners, Array(state.connections.values))
        }
        // Existing connections are told first, then the listeners close: a connection accepted
        // meanwhile is refused at once (`track`), and an answer that leaves after the listener has
        // closed already says `Connection: close` (the event is queued on its loop before).
        for connection in connections {
            connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
        for listener in listeners { try? await listener.channel.close() }
        await waitUntilDrained(upTo: gracePeriod)
        let remaining = state.withLockedValue { Array($0.connections.values) }
        // All at once: a TLS connection may wait up to its close deadline for close_notify, and
        // those waits must not add up. Then wait until each is gone (and so no longer counted).
        for connection in remaining { connection.close(promise: nil) }
        for connection in remaining { try? await connection.closeFuture.get() }
        healthChecker.stop()
        addressRefresher.stop()
        upstream.shutdown()
        state.withLockedValue { $0.purgeListener }?.cancel()
        try? await fleet?.close().get()
        // Last: the spans of the requests that just drained are sent before it stops.
        await tracers.shutdown()
    }
}

extension Gateway {
    /// Returns when the last client connection has closed, or when `limit` has passed.
    private func waitUntilDrained(upTo limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let now = self.state.withLockedValue { state -> Bool in
                        guard !state.connections.isEmpty, !state.drainOver else { return true }
                        state.drained.append(continuation)
                        return false
                    }
                    if now { continuation.resume() }
                }
            }
            group.addTask { try? await Task.sleep(for: limit) }
            await group.next()
            group.cancelAll()
            // The sleeper ends at once when cancelled; a waiter still parked is resumed here.
            let parked = self.state.withLockedValue { state in
                state.drainOver = true
                defer { state.drained = [] }
                return state.drained
            }
            for waiter in parked { waiter.resume() }
        }
    }
}

/// A listener of the policy could not be bound (the port is taken, the address is not local...).
public struct ListenerBindError: Error, CustomStringConvertible {
    public let listener: ListenerPolicy
    public let underlying: any Error

    public var description: String {
        let reason = (underlying as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(underlying)"
        return "cannot listen on \(listener.address):\(listener.port) (listener \"\(listener.name)\"): \(reason)"
    }
}
