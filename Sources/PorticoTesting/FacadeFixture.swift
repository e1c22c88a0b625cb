import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Portico
import PorticoClient
import PorticoDemoBackends
import Synchronization

/// The demo policy, made to run on ephemeral ports: the shipped keys and tiers (`policies/keys.yaml`)
/// as they are, the demo's `stockQuote` (two proxied versions with their buckets and minimum app
/// version) and `echo` services, the demo backends on their test ports, a locator whose base URL is
/// the test gateway's and whose signing key is the tests' own.
///
/// The services are written here rather than read from `policies/services.yaml`, so that the
/// façade's tests do not change when the shipped demo's handlers do (its stockQuote may become a
/// facade over other feeds): what they need is the versioning, signature and rate-limit behaviour.
/// `echo` requires a signature here, so that a signed POST is verified.
public enum FacadeFixture {
    public static let root = Repository.root.appendingPathComponent("policies")
    public static let demoSecret = try! String(contentsOf: root.appendingPathComponent("secrets/demo-app.secret"), encoding: .utf8)
        .trimmingCharacters(in: .whitespacesAndNewlines)
    public static let pinned = LocatorKeys.pinned

    /// The ports of the backends behind the streaming services: `ticks` (an event stream, the demo's
    /// live backend) and `chat` (a WebSocket echo).
    public struct StreamBackends: Sendable {
        public var ticks: Int
        public var chat: Int

        public init(ticks: Int, chat: Int) {
            self.ticks = ticks
            self.chat = chat
        }
    }

    /// The locator's signature lasts `maxAge + signatureGrace` (20 minutes) and is made anew every
    /// `maxAge` (5 minutes): a client whose clock is 10 minutes fast (the clock-skew tests) accepts
    /// any document the gateway serves, however long a loaded machine takes between fetches.
    ///
    /// - Parameters:
    ///   - secure: the locator's base URL is `https://localhost:PORT` (the listener serves TLS).
    ///   - streams: adds the signed `ticks` (event stream) and `chat` (WebSocket) services.
    public static func policy(
        quotesPort: Int, echoPort: Int, gatewayPort: Int?, quotesMaxConcurrent: Int = 64, secure: Bool = false,
        streams: StreamBackends? = nil
    ) -> String {
        let keys = try! String(contentsOf: root.appendingPathComponent("keys.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "secretFile: secrets/demo-app.secret", with: "secret: \"\(demoSecret)\"")
            // The demo's WebSocket service is among this fixture's only with `streams`.
            .replacingOccurrences(
                of: "services: [stockQuote, echo, chat]",
                with: streams == nil ? "services: [stockQuote, echo]" : "services: [stockQuote, echo, chat, ticks]")
        let streamServices =
            streams == nil
            ? ""
            : """
              ticks:
                path: /ticks
                auth: signature
                limits: { streamIdleTimeout: 60s }
                versions:
                  1: { proxy: { backend: live, rewrite: /ticks } }
              chat:
                path: /chat
                auth: signature
                websocket: true
                versions:
                  1: { proxy: { backend: chat, rewrite: /room } }

            """
        let streamBackends =
            streams.map {
                """
                  live: { url: "http://127.0.0.1:\($0.ticks)" }
                  chat: { url: "http://127.0.0.1:\($0.chat)" }

                """
            } ?? ""
        let base = gatewayPort.map { secure ? "https://localhost:\($0)" : "http://127.0.0.1:\($0)" } ?? "http://127.0.0.1:1"
        return """
            backends:
              quotes: { url: "http://127.0.0.1:\(quotesPort)", maxConcurrent: \(quotesMaxConcurrent) }
              echo: { url: "http://127.0.0.1:\(echoPort)" }
            \(streamBackends)signatures: { maxClockSkew: 300s, requireNonce: true }
            locator:
              maxAge: 300s
              signatureGrace: 900s
              environments:
                production: { publicBaseURL: "\(base)", listeners: [test] }
              signingKey: "\(LocatorKeys.signing.file)"
            services:
              stockQuote:
                path: /api/{version}/stockquote
                auth: signature
                versions:
                  1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
                  2: { proxy: { backend: quotes, rewrite: /v2/quotes } }
                compatibility:
                  - { clients: "<2.0.0", version: 1 }
                  - { clients: ">=2.0.0", version: 2 }
                default: latest
                minimumClientVersion: 1.0.0
              echo:
                path: /echo
                auth: signature
                versions:
                  1: { proxy: { backend: echo, rewrite: / } }
            \(streamServices)\(keys)
            """
    }

    /// A rate limiter whose clock moves only when a test moves it.
    public final class ManualLimiterClock: Sendable {
        public let nanos = Mutex<Int64>(1_000_000_000_000)

        public init() {}

        public var limiter: RateLimiter { RateLimiter(clock: { [self] in self.nanos.withLock { $0 } }) }
        public func advance(by duration: Duration) {
            let (seconds, attoseconds) = duration.components
            nanos.withLock { $0 += seconds * 1_000_000_000 + attoseconds / 1_000_000_000 }
        }
    }

    /// Runs `body` with the demo policy's gateway, a quotes backend (`quotes`, defaults to the demo
    /// one) and the demo echo backend. With `tls` (a listener `tls` mapping) the gateway serves
    /// HTTPS and the locator URL given to `body` is `https://localhost:PORT/…`. With `streams`,
    /// the policy has the signed `ticks` and `chat` services on those backends.
    public static func run(
        quotes: @escaping BackendServer.Handler = DemoBackends.quotes, quotesPort: Int? = nil, quotesMaxConcurrent: Int = 64,
        rateLimiter: RateLimiter = RateLimiter(), tls: String? = nil, streams: StreamBackends? = nil,
        logger: Logger? = nil, _ body: (TestGateway, URL, [BackendServer]) async throws -> Void
    ) async throws {
        let backends = [try await BackendServer.start(handler: quotes), try await BackendServer.start(handler: DemoBackends.echo)]
        let ports = (quotes: quotesPort ?? backends[0].port, echo: backends[1].port)
        let gateway: TestGateway
        do {
            gateway = try await TestGateway.start(
                policy: policy(
                    quotesPort: ports.quotes, echoPort: ports.echo, gatewayPort: nil, quotesMaxConcurrent: quotesMaxConcurrent,
                    streams: streams),
                logger: logger, tls: tls, rateLimiter: rateLimiter)
        } catch {
            for backend in backends { try? await backend.shutdown() }
            throw error
        }
        do {
            // The locator must name the port the gateway got: a reload, as an operator's would.
            let located = policy(
                quotesPort: ports.quotes, echoPort: ports.echo, gatewayPort: gateway.port, quotesMaxConcurrent: quotesMaxConcurrent,
                secure: tls != nil, streams: streams)
            gateway.gateway.store.replace(with: try TestGateway.snapshot(policy: located, accessLog: logger != nil, tls: tls))
            let base = tls == nil ? "http://127.0.0.1:\(gateway.port)" : "https://localhost:\(gateway.port)"
            try await body(gateway, URL(string: base + "/serviceLocator.json")!, backends)
        } catch {
            await gateway.shutdown()
            for backend in backends { try? await backend.shutdown() }
            throw error
        }
        await gateway.shutdown()
        for backend in backends { try? await backend.shutdown() }
    }

    public static func api(
        _ locator: URL, appVersion: String = "2.4.1", secret: String = demoSecret, pinnedKey: PinnedLocatorKey = pinned,
        credentials: (any RequestCredentials)? = nil, configuration: PorticoAPI.Configuration = .init(), trust: ServerTrust = .system,
        clock: @escaping @Sendable () -> Date = { Date() }, sleep: @escaping @Sendable (Duration) async throws -> Void = { _ in }
    ) -> PorticoAPI {
        PorticoAPI(
            locator: locator, pinnedKey: pinnedKey, keyID: "demo-app", secret: .value(secret),
            identity: ClientIdentity(appVersion: appVersion, platform: "iphone"), credentials: credentials, configuration: configuration,
            trust: trust, clock: clock, sleep: sleep)
    }

    /// The demo quotes backend, with validators: a strong `ETag` per body, `Cache-Control:
    /// max-age=60`, and a 304 for a matching `If-None-Match`. Counts the 304s it sends.
    public final class ValidatingQuotes: Sendable {
        public let notModified = Atomic<Int>(0)
        public let conditional = Atomic<Int>(0)

        public init() {}

        public var handler: BackendServer.Handler {
            { [self] request in
                guard case .full(let status, var headers, let body) = DemoBackends.quotes(request), status == .ok else {
                    return DemoBackends.quotes(request)
                }
                let etag = "\"q-\(body.readableBytes)-\(request.path.count)\""
                headers.replaceOrAdd(name: "etag", value: etag)
                headers.replaceOrAdd(name: "cache-control", value: "max-age=60")
                if let match = request.headers.first(name: "if-none-match") {
                    conditional.add(1, ordering: .relaxed)
                    if match == etag {
                        notModified.add(1, ordering: .relaxed)
                        headers.remove(name: "content-type")
                        return .full(status: .notModified, headers: headers, body: ByteBuffer())
                    }
                }
                return .full(status: status, headers: headers, body: body)
            }
        }
    }
}

/// stockQuote's version 2 contract; version 1 answers lack the optional members.
public struct Quote: Decodable, Sendable, Equatable {
    public var symbol: String
    public var name: String
    public var currentPrice: Double
    public var openingPrice: Double?
    public var percentageChange: Double?
}

/// What the echo backend says it received.
public struct Echoed: Decodable, Sendable {
    public var method: String
    public var path: String
    public var query: String
    public var headers: [String: String]
    public var body: String
}

/// A user token from the "account system", next to the app's signature.
public struct BearerToken: RequestCredentials {
    public let token: String

    public init(token: String) { self.token = token }

    public func fields(for request: APIRequest) async throws -> [String: String] { ["Authorization": "Bearer \(token)"] }
}
