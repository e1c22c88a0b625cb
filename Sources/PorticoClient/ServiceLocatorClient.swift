import Foundation

/// Finds service endpoints through the gateway's service locator document, and keeps a copy.
///
/// The document is cached as HTTP says: fresh for its `Cache-Control: max-age` (less its `Age`,
/// when a CDN served it), then revalidated with `If-None-Match` and its `ETag`, so an unchanged
/// document costs a 304. A failed refresh never loses the last good document: an app that goes
/// offline keeps resolving to the endpoints it last saw.
///
/// With a ``PinnedLocatorKey`` it also checks the gateway's Ed25519 signature on every document and
/// every revalidation, and refuses (keeping the last good document) one that is unsigned, altered,
/// expired or signed with another key: a document served by a CDN is then as trustworthy as one
/// from the gateway.
///
/// ```swift
/// let locator = ServiceLocatorClient(url: URL(string: "https://api.example.com/serviceLocator.json")!)
/// let quotes = try await locator.url(for: "stockQuote", version: "2")
/// ```
public actor ServiceLocatorClient {
    public struct Configuration: Sendable {
        /// How long a document without `Cache-Control: max-age` stays fresh.
        public var defaultMaxAge: Duration = .seconds(300)
        /// The least time between two fetches that were not asked for explicitly: after a failure,
        /// a stale document is used without retrying until this has passed, and an endpoint missing
        /// from the document triggers at most one refresh per interval.
        public var minimumRefreshInterval: Duration = .seconds(30)

        public init(defaultMaxAge: Duration = .seconds(300), minimumRefreshInterval: Duration = .seconds(30)) {
            self.defaultMaxAge = defaultMaxAge
            self.minimumRefreshInterval = minimumRefreshInterval
        }
    }

    /// The last good document and what HTTP said about it.
    private struct Cached {
        var document: ServiceLocatorDocument
        var etag: String?
        var freshUntil: Date
        /// The exact bytes, which a 304 is verified against.
        var body: Data
        /// The stored response's fields (lowercased names), which a 304 updates.
        var fields: [String: String]
    }

    public nonisolated let url: URL
    private let transport: any ServiceLocatorTransport
    private let configuration: Configuration
    private let clock: @Sendable () -> Date
    private let pinnedKey: PinnedLocatorKey?
    private var cached: Cached?
    private var lastAttempt: Date?
    private var lastFailure: Date?
    private var inFlight: Task<ServiceLocatorDocument, any Error>?

    /// - Parameters:
    ///   - url: where the gateway publishes the document (its `locator.path`).
    ///   - transport: how to fetch it; `URLSession` by default.
    ///   - pinnedKey: the gateway's locator key (`portico locator-key`); with one, only documents
    ///     it signed are accepted (see ``PinnedLocatorKey``).
    ///   - clock: the time freshness and signatures are judged by; tests pass their own.
    public init(
        url: URL, transport: any ServiceLocatorTransport = URLSessionLocatorTransport(), configuration: Configuration = .init(),
        pinnedKey: PinnedLocatorKey? = nil, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.url = url
        self.transport = transport
        self.configuration = configuration
        self.pinnedKey = pinnedKey
        self.clock = clock
    }

    /// The last good document, if one was ever fetched.
    public var document: ServiceLocatorDocument? { cached?.document }

    /// The URL of `service` at `version`.
    ///
    /// Uses the cached document while it is fresh and refreshes it when stale; if the refresh fails
    /// the stale document answers. A service or version the document does not list triggers one
    /// refresh (it may be newer than the document), then fails with
    /// ``ServiceLocatorError/unknownEndpoint``.
    public func url(for service: String, version: String) async throws -> URL {
        try await endpoint(service: service, version: version).url
    }

    /// The whole entry of `service` at `version`, metadata included; see ``url(for:version:)``.
    public func endpoint(service: String, version: String) async throws -> ServiceLocatorDocument.Endpoint {
        try await lookup {
            $0.endpoint(service: service, version: version)
        } missing: {
            .unknownEndpoint(service: service, version: version)
        }
    }

    /// The URL at which the gateway picks the version of `service` from the app's version: see
    /// ``ServiceLocatorDocument/activeURL(service:)``. Cached and refreshed as ``url(for:version:)``.
    public func activeURL(for service: String) async throws -> URL {
        try await lookup {
            $0.activeURL(service: service)
        } missing: {
            .noActiveEndpoint(service: service)
        }
    }

    /// Finds something in the document: the cached one while fresh, refreshed when stale (the stale
    /// one answers if that fails), and refreshed once more when it is not there.
    private func lookup<Found>(
        _ find: (ServiceLocatorDocument) -> Found?, missing: () -> ServiceLocatorError
    ) async throws -> Found {
        var refreshed = false
        if cached == nil || (clock() >= cached!.freshUntil && !recently(lastFailure)) {
            do {
                _ = try await refresh()
                refreshed = true
            } catch {
                if cached == nil { throw error }
            }
        }
        if let document = cached?.document, let found = find(document) { return found }
        if !refreshed, !recently(lastAttempt) {
            _ = try? await refresh()
            if let document = cached?.document, let found = find(document) { return found }
        }
        throw missing()
    }

    /// Fetches the document now (conditionally, when one is cached), whatever its freshness.
    ///
    /// Concurrent callers share one fetch. On failure the last good document stays and the error
    /// is thrown: a ``ServiceLocatorError`` (`unreachable`, `httpStatus` or `invalidDocument`).
    @discardableResult
    public func refresh() async throws -> ServiceLocatorDocument {
        if let inFlight { return try await inFlight.value }
        let task = Task { try await self.fetch() }
        inFlight = task
        defer { inFlight = nil }
        return try await task.value
    }

    /// Whether `moment` lies within the minimum refresh interval before now.
    private func recently(_ moment: Date?) -> Bool {
        guard let moment else { return false }
        return clock().timeIntervalSince(moment) < Self.seconds(configuration.minimumRefreshInterval)
    }

    private func fetch() async throws -> ServiceLocatorDocument {
        do {
            lastAttempt = clock()
            let document = try await fetchOnce()
            lastFailure = nil
            return document
        } catch {
            lastFailure = clock()
            throw error
        }
    }

    private func fetchOnce() async throws -> ServiceLocatorDocument {
        var headers = ["Accept": "application/json"]
        if let etag = cached?.etag { headers["If-None-Match"] = etag }
        let response: ServiceLocatorResponse
        do {
            response = try await transport.get(url, headers: headers)
        } catch {
            throw ServiceLocatorError.unreachable(error)
        }
        var freshUntil = clock().addingTimeInterval(lifetime(of: response))
        switch response.status {
        case 304 where cached != nil:
            // The stored 200 takes the 304's fields (RFC 9111 §4.3.4), its new signature among them;
            // a 304 without one (an intermediary that drops fields) leaves the stored signature,
            // which must then still hold.
            let fields = cached!.fields.merging(response.headers) { _, new in new }
            if let pinnedKey {
                let updated = ServiceLocatorResponse(status: 200, headers: fields, body: cached!.body)
                let signatureExpires = try LocatorSignatureVerifier.verify(
                    status: 200, headers: updated, body: cached!.body, key: pinnedKey, now: clock())
                // Cache-Control is not signed: never trust the copy past its signature.
                freshUntil = min(freshUntil, signatureExpires)
            }
            cached!.fields = fields
            cached!.freshUntil = freshUntil
            if let etag = response.header("etag") { cached!.etag = etag }
            return cached!.document
        case 200:
            if let pinnedKey {
                let signatureExpires = try LocatorSignatureVerifier.verify(
                    status: 200, headers: response, body: response.body, key: pinnedKey, now: clock())
                freshUntil = min(freshUntil, signatureExpires)  // Cache-Control is not signed
            }
            let document = try ServiceLocatorDocument.decode(response.body)
            // The signature's tag said so already; the document must not say otherwise.
            if let environment = pinnedKey?.environment, document.environment != environment {
                throw ServiceLocatorError.invalidSignature(
                    "the document is for \(document.environment.map { "environment \($0)" } ?? "no environment"), not \(environment)")
            }
            cached = Cached(
                document: document, etag: response.header("etag"), freshUntil: freshUntil, body: response.body, fields: response.headers)
            return document
        default:
            throw ServiceLocatorError.httpStatus(response.status)
        }
    }

    /// Seconds the response stays fresh (RFC 9111 §4.2): `max-age` less `Age`; none for
    /// `no-cache` or `no-store`; the configured default without `Cache-Control`.
    private func lifetime(of response: ServiceLocatorResponse) -> TimeInterval {
        guard let cacheControl = response.header("cache-control") else { return Self.seconds(configuration.defaultMaxAge) }
        var maxAge: TimeInterval?
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let name = parts.first else { continue }  // a bare "=": nothing to read
            switch name {
            case "no-cache", "no-store": return 0
            case "max-age" where parts.count == 2: maxAge = TimeInterval(parts[1].trimmingCharacters(in: ["\""]))
            default: continue
            }
        }
        guard let maxAge else { return Self.seconds(configuration.defaultMaxAge) }
        let age = response.header("age").flatMap(TimeInterval.init) ?? 0
        return max(0, maxAge - age)
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
