import Dispatch
import NIOEmbedded
import NIOHTTP1
import PorticoPolicy
import PorticoSigning
import PorticoTestSupport
import PorticoTesting
import PorticoUpstream
import Testing

@testable import Portico

/// What a compiled policy holds ready for requests, and that it says the same as the policy did
/// when each request worked it out for itself.
@Suite("Compiled policy")
struct CompiledPolicyTests {
    static let policy = """
        backends:
          plain: { url: "http://127.0.0.1:8080", connectTimeout: 1s, timeout: 7s }
          standardPort: { url: "http://quotes.internal:80/base", rateLimit: { rate: 20/s, burst: 5 }, maxConcurrent: 3 }
          secure: { url: "https://secure.internal", client: curl }
          secureOddPort: { url: "https://secure.internal:8443/x/y" }
          ipv6: { url: "http://[::1]:9000" }
        services:
          open:
            path: /open
            addressRateLimit: { rate: 10/m, burst: 2 }
            versions: { 1: { proxy: { backend: plain } } }
          quotes:
            path: /api/{version}/quotes
            auth: apiKey
            versions:
              1: { proxy: { backend: standardPort, rewrite: /v1 } }
              2: { proxy: { backend: secure } }
          other: { path: /other, auth: apiKey, versions: { 1: { proxy: { backend: ipv6, rewrite: / } } } }
          odd: { path: /odd, versions: { 1: { proxy: { backend: secureOddPort } } } }
        tiers:
          standard: { rate: 100/m, burst: 10, services: { other: { rate: 5/s, burst: 1 } } }
          gold: { rate: 1000/h, burst: 50 }
        apiKeys: { header: X-Custom-Key }
        signatures: { requiredComponents: ["@method", "@path"] }
        """

    static func compiled() throws -> CompiledPolicy {
        CompiledPolicy(try TestGateway.snapshot(policy: policy))
    }

    static func routed(_ uri: String, in compiled: CompiledPolicy) throws -> RoutedRequest {
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri, headers: ["Host": "gateway.example"])
        return try Route.resolve(head, in: compiled).get()
    }

    /// The exchange after the route and version stages: its service and the version's handler and backend.
    static func served(_ uri: String, in compiled: CompiledPolicy) throws -> Exchange {
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri, headers: ["Host": "gateway.example"])
        let exchange = Exchange(head: head, requestID: "r", policy: compiled, client: ClientConnection())
        let loop = EmbeddedEventLoop()
        for stage in [RouteStage(), VersionStage()] as [any RequestStage] {
            guard case .proceed = stage.process(exchange, on: loop) else { throw CancellationError() }
        }
        return exchange
    }

    @Test("each backend's origin, Host value, URL prefix, timeouts and client are derived once")
    func backends() throws {
        let compiled = try Self.compiled()
        let plain = try #require(compiled.backend(named: "plain"))
        #expect(plain.primary.origin == "http://127.0.0.1:8080")
        #expect(plain.primary.urlPrefix == "http://127.0.0.1:8080")
        #expect(plain.primary.hostHeader == "127.0.0.1:8080")
        #expect(plain.connectTimeout == .seconds(1))
        #expect(plain.timeout == .seconds(7))
        #expect(plain.client == nil)
        #expect(plain.rateLimit == nil)
        let standard = try #require(compiled.backend(named: "standardPort"))
        #expect(standard.primary.hostHeader == "quotes.internal")
        #expect(standard.primary.urlPrefix == "http://quotes.internal:80/base")
        #expect(standard.maxConcurrent == 3)
        #expect(standard.rateLimit?.policyField == "\"backend.standardPort\";q=20;w=1")
        let secure = try #require(compiled.backend(named: "secure"))
        #expect(secure.primary.hostHeader == "secure.internal")
        #expect(secure.primary.origin == "https://secure.internal:443")
        #expect(secure.client == .curl)
        #expect(try #require(compiled.backend(named: "secureOddPort")).primary.hostHeader == "secure.internal:8443")
        let ipv6 = try #require(compiled.backend(named: "ipv6"))
        #expect(ipv6.primary.hostHeader == "[::1]:9000")
        #expect(ipv6.primary.urlPrefix == "http://[::1]:9000")
    }

    @Test("a routed request carries its service's rules and its version's backend")
    func routes() throws {
        let compiled = try Self.compiled()
        let first = try Self.served("/api/1/quotes/AAPL", in: compiled)
        #expect(first.routed?.rules.name == "quotes")
        #expect(first.routed?.rules === compiled.rules(named: "quotes"))
        #expect(first.destination?.proxyBackend === compiled.backend(named: "standardPort"))
        let second = try Self.served("/api/v2/quotes", in: compiled)
        #expect(second.destination?.proxyBackend === compiled.backend(named: "secure"))
        let byQuery = try Self.served("/open/x?apiVersion=1", in: compiled)
        #expect(byQuery.destination?.proxyBackend === compiled.backend(named: "plain"))
        for (index, service) in compiled.snapshot.routes.services.enumerated() {
            #expect(compiled.rules(for: service).name == service.name)
            #expect(service.index == index)
        }
    }

    @Test("the upstream URL is the backend's prefix, the rewritten or original path and the query")
    func upstreamURLs() throws {
        let compiled = try Self.compiled()
        func url(_ uri: String) throws -> String {
            let exchange = try Self.served(uri, in: compiled)
            guard case .proxy(let compiled) = exchange.destination, let routed = exchange.routed else {
                throw CancellationError()
            }
            return ProxyForwarding.upstreamURL(routed, proxy: compiled.policy, backend: compiled.backend, target: compiled.backend.primary)
        }
        #expect(try url("/api/1/quotes/AAPL?x=1") == "http://quotes.internal:80/base/v1/AAPL?x=1")
        #expect(try url("/api/1/quotes") == "http://quotes.internal:80/base/v1")
        #expect(try url("/api/2/quotes/AAPL") == "https://secure.internal:443/api/2/quotes/AAPL")
        #expect(try url("/open") == "http://127.0.0.1:8080/open")
        #expect(try url("/open/?") == "http://127.0.0.1:8080/open/?")
        // A rewrite to "/" (stored as "") with nothing after the prefix and no base path: "/".
        #expect(try url("/other") == "http://[::1]:9000/")
        #expect(try url("/other?q=1") == "http://[::1]:9000/?q=1")
        #expect(try url("/other/a/b") == "http://[::1]:9000/a/b")
        #expect(try url("/odd/z") == "https://secure.internal:8443/x/y/odd/z")
    }

    @Test("each limit's GCRA parameters and RateLimit-Policy text are built once, shared where the limit is the same")
    func rateLimits() throws {
        let compiled = try Self.compiled()
        let quotes = try #require(compiled.rules(named: "quotes"))
        let other = try #require(compiled.rules(named: "other"))
        let standard = try #require(quotes.tierLimits["standard"])
        #expect(standard.policyField == "\"tier.standard\";q=100;w=60")
        #expect(standard.gcra == GCRALimit(count: 100, periodNanos: 60_000_000_000, burst: 10))
        #expect(try #require(quotes.tierLimits["gold"]).policyField == "\"tier.gold\";q=1000;w=3600")
        // The tier's own limit is one object for every service without an exception...
        #expect(other.tierLimits["gold"] === quotes.tierLimits["gold"])
        #expect(compiled.rules(named: "open")?.tierLimits["standard"] === standard)
        // ...and a service with one has its own.
        let exception = try #require(other.tierLimits["standard"])
        #expect(exception !== standard)
        #expect(exception.policyField == "\"tier.standard\";q=5;w=1")
        #expect(exception.gcra == GCRALimit(count: 5, periodNanos: 1_000_000_000, burst: 1))
        let address = try #require(compiled.rules(named: "open")?.addressLimit)
        #expect(address.policyField == "\"address.open\";q=10;w=60")
        #expect(quotes.addressLimit == nil)
    }

    @Test("the limiter reports the compiled limit it drew from")
    func limiterUsesCompiledLimits() throws {
        let compiled = try Self.compiled()
        let limiter = RateLimiter(clock: { 0 })
        let quotes = try #require(compiled.rules(named: "quotes"))
        let backend = compiled.backend(named: "standardPort")
        let applied = try #require(
            try limiter.admit(service: quotes, tier: "standard", keyID: "k", clientAddress: nil, backend: backend).get())
        // Tier: 10 at once, 9 left; backend: 5 at once, 4 left, the tighter.
        #expect(applied.kind == .backend)
        #expect(applied.limit === backend?.rateLimit)
        #expect(applied.policyField == "\"backend.standardPort\";q=20;w=1")
        #expect(applied.statusField == "\"backend.standardPort\";r=4;t=1")
        // An unknown tier sets no client limit, as before.
        let none = try limiter.admit(service: quotes, tier: "missing", keyID: "k", clientAddress: nil, backend: nil).get()
        #expect(none == nil)
    }

    @Test("the API-key header is kept lowercased for the forwarding filter")
    func apiKeyHeader() throws {
        #expect(try Self.compiled().apiKeyHeader == "x-custom-key")
    }

    @Test("the required signature components come in the policy's order, then the request's own")
    func signatureRequirements() throws {
        let requirements = try Self.compiled().signatureRequirements
        #expect(requirements.always == [.method, .path])
        let all: [ComponentIdentifier] = [.method, .path, .query, .field("content-digest"), .field("x-client-version")]
        #expect(requirements.firstMissing(from: all, hasQuery: true, hasBody: true, hasClientVersion: true) == nil)
        #expect(requirements.firstMissing(from: [.path], hasQuery: true, hasBody: true, hasClientVersion: true) == .method)
        #expect(requirements.firstMissing(from: [.method, .path], hasQuery: false, hasBody: false, hasClientVersion: false) == nil)
        #expect(requirements.firstMissing(from: [.method, .path], hasQuery: true, hasBody: true, hasClientVersion: true) == .query)
        #expect(
            requirements.firstMissing(from: [.method, .path, .query], hasQuery: true, hasBody: true, hasClientVersion: true)
                == .field("content-digest"))
        #expect(
            requirements.firstMissing(from: [.method, .path], hasQuery: false, hasBody: false, hasClientVersion: true)
                == .field("x-client-version"))
    }

    @Test("a renamed client-version field is the one a signature must cover when the client sends it")
    func renamedClientVersionField() throws {
        let compiled = CompiledPolicy(try TestGateway.snapshot(policy: Self.policy + "\nclients: { versionHeader: X-App-Version }\n"))
        let requirements = compiled.signatureRequirements
        #expect(requirements.clientVersionHeader == "x-app-version")  // lowercased: matched against field names ignoring case
        #expect(
            requirements.firstMissing(
                from: [.method, .path, .field("x-client-version")], hasQuery: false, hasBody: false, hasClientVersion: true)
                == .field("x-app-version"))
        #expect(
            requirements.firstMissing(
                from: [.method, .path, .field("x-app-version")], hasQuery: false, hasBody: false, hasClientVersion: true)
                == nil)
    }

    @Test("the client-platform field must be covered when the client sends it, since it can pick the API version")
    func clientPlatformField() throws {
        let requirements = try Self.compiled().signatureRequirements
        let identity: [ComponentIdentifier] = [.method, .path, .field("x-client-version"), .field("x-client-platform")]
        #expect(
            requirements.firstMissing(
                from: [.method, .path, .field("x-client-version")], hasQuery: false, hasBody: false, hasClientVersion: true,
                hasClientPlatform: true) == .field("x-client-platform"))
        #expect(
            requirements.firstMissing(from: identity, hasQuery: false, hasBody: false, hasClientVersion: true, hasClientPlatform: true)
                == nil)
        #expect(
            requirements.firstMissing(
                from: [.method, .path], hasQuery: false, hasBody: false, hasClientVersion: false, hasClientPlatform: false)
                == nil)
    }

    @Test("the store hands out one compiled policy until a reload swaps in the next, under concurrent readers")
    func storeSwaps() throws {
        let first = try TestGateway.snapshot(policy: Self.policy)
        let second = try TestGateway.snapshot(policy: "services: {}\n")
        let store = PolicyStore(first)
        let initial = store.current
        #expect(store.current === initial)
        #expect(initial.snapshot.policy.services.count == 4)
        store.replace(with: second)
        #expect(store.current !== initial)
        #expect(store.current.snapshot.policy.services.isEmpty)
        // Readers on every thread while the policy is replaced over and over: each read is a whole
        // compiled policy, one of the two.
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0..<2000 {
                if worker == 0 && round % 20 == 0 {
                    store.replace(with: round % 40 == 0 ? first : second)
                } else {
                    let current = store.current
                    precondition(current.services.count == current.snapshot.routes.services.count)
                    precondition(current.services.count == 4 || current.services.isEmpty)
                }
            }
        }
        #expect(initial.services.count == 4)
    }

    @Test("a connection's reader keeps its policy until a reload, then reads the new one once")
    func readerFollowsReloads() throws {
        let first = try TestGateway.snapshot(policy: Self.policy)
        let second = try TestGateway.snapshot(policy: "services: {}\n")
        let store = PolicyStore(first)
        var reader = PolicyStore.Reader(store)
        let initial = reader.current()
        #expect(initial === store.current)
        #expect(reader.current() === initial)
        store.replace(with: second)
        let reloaded = reader.current()
        #expect(reloaded !== initial)
        #expect(reloaded === store.current)
        #expect(reloaded.snapshot.policy.services.isEmpty)
        #expect(reader.current() === reloaded)
        // Readers racing reloads always see a whole policy, and end on the last one installed.
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            var reader = PolicyStore.Reader(store)
            for round in 0..<2000 {
                if worker == 0 && round % 20 == 0 {
                    store.replace(with: round % 40 == 0 ? first : second)
                } else {
                    let current = reader.current()
                    precondition(current.services.count == 4 || current.services.isEmpty)
                }
            }
        }
        var late = PolicyStore.Reader(store)
        #expect(late.current() === store.current)
        #expect(reader.current() === store.current)
    }
}
