import Foundation
import NIOCore
import NIOHTTP1
import PorticoCrypto
import PorticoPolicy
import PorticoSigning

/// The admin listener's endpoints: what each request gets, decided apart from the channel.
///
/// | endpoint | answer |
/// |---|---|
/// | `GET /healthz` | 200 while the process runs |
/// | `GET /readyz` | 200 once the listeners are up and a policy is loaded; 503 while draining |
/// | `GET /metrics` | the Prometheus text of ``GatewayMetrics``, and the backends' targets (``BackendsReport``) |
/// | `GET /admin/backends` | each backend's targets now: health, ejection, failures (``BackendsReport``) |
/// | `POST /admin/reload` | a reload (``PolicyReloader``); `?dryRun=true` only reports what would change |
/// | `GET /admin/cache` | the response cache's bytes and entries, and its bounds |
/// | `POST /admin/cache/purge` | drops cached responses: `?target=/path%3Fquery` (with `host=` for a service bound to one), `?service=NAME`, `?tag=TAG` (`Surrogate-Key`, `Cache-Tag`) or `?all=true` |
/// | `GET /admin/policy` | the active revision, services, versions, backends, limits, keys by id and status, the cluster section (its password as `set`) |
/// | `GET /` | the console's page (``ConsolePage``), and `/console/console.css`, `/console/console.js` |
/// | `GET /admin/console` | everything the console draws (``ConsoleState``) |
///
/// The console's page and files hold no data and are served without the token (the page asks for
/// it), under the same address rules and, with no token configured, to loopback hosts only. A
/// request that carries an `Origin` (a browser's POST, any cross-site request) must come from the
/// console itself: the same origin as the listener, with the page's token in `X-Portico-Console`,
/// which another site's page cannot read.
///
/// Every request must carry `Authorization: Bearer <token>` when the policy names an admin token,
/// and always when the listener is bound off loopback (with no token configured, it then refuses
/// everything). The token is compared as SHA-256 digests, in constant time, so neither its bytes
/// nor its length leak through timing. No answer holds a secret: keys are listed by id and status.
struct AdminAPI: Sendable {
    let gateway: Gateway
    let reloader: PolicyReloader?
    /// The address the admin listener is bound to (fixed at start).
    let boundAddress: String
    /// The token the console's page carries, made at start: what tells the page's own requests
    /// from another site's.
    var consoleToken: String = ConsolePage.newToken()

    struct Response: Sendable {
        var status: HTTPResponseStatus
        var contentType: String
        var body: [UInt8]
        var headers: [(String, String)] = []
    }

    /// Where a request says it comes from: what tells a browser's request apart from a tool's.
    struct RequestOrigin: Sendable {
        var host: String?
        /// Browsers send `Origin` on cross-site requests (every POST among them); tools do not.
        var origin: String?
        /// The TCP peer's address bytes, for the admin listener's `allowFrom` and `denyFrom`.
        var peer: [UInt8]? = nil
        /// The request's `Accept`: `/metrics` answers OpenMetrics (with exemplars) to a scraper that asks for it.
        var accept: String? = nil
        /// `X-Portico-Console`: the token of the console page the request comes from.
        var consoleToken: String? = nil

        /// `Sec-Fetch-Site`, which browsers send with every request: `cross-site` for another site's.
        var fetchSite: String? = nil

        /// Whether `Origin` names the listener itself: its own `Host`, over `http://` (or `https://`,
        /// behind a proxy that terminates TLS and keeps the `Host`).
        var isSameOrigin: Bool {
            guard let origin = origin?.lowercased(), let host = host?.lowercased() else { return false }
            return origin == "http://" + host || origin == "https://" + host
        }

        static let tool = RequestOrigin(host: "127.0.0.1", origin: nil)

        /// Whether the request could come from a web page rather than from a tool on this host: it
        /// carries an `Origin`, or names a host that is not loopback (DNS rebinding points a
        /// public name at 127.0.0.1 and keeps that name in `Host`).
        var mayBeFromABrowser: Bool { origin != nil || !namesLoopback }

        /// Whether `Host` names a loopback address (or is absent, as from a tool speaking HTTP/1.0).
        var namesLoopback: Bool {
            guard let host else { return true }
            var name = Substring(host)
            if name.hasPrefix("["), let close = name.firstIndex(of: "]") {
                // Only a port may follow the literal.
                let rest = name[name.index(after: close)...]
                guard rest.isEmpty || (rest.first == ":" && rest.utf8.dropFirst().allSatisfy { $0 &- UInt8(ascii: "0") < 10 }) else {
                    return false
                }
                name = name[name.index(after: name.startIndex)..<close]
            } else if let colon = name.lastIndex(of: ":"), name.firstIndex(of: ":") == colon {
                name = name[..<colon]
            }
            return AdminPolicy.isLoopback(String(name).lowercased())
        }
    }

    func respond(method: HTTPMethod, uri: String, authorization: String?, from requester: RequestOrigin = .tool) async -> Response {
        // The peer's address first: a listener the operator keeps to some networks answers no one else.
        if let list = gateway.store.current.snapshot.policy.admin?.addresses, !list.isEmpty,
            !(requester.peer.map(list.admits) ?? (list.allow == nil))
        {
            return problem(
                .forbidden, "address-refused", "Address not allowed", "The admin listener does not accept requests from this address.")
        }
        let (path, query) = Self.split(uri)
        // The console's page and files: no data in them, and the page must load to ask for the token.
        if method == .GET || method == .HEAD, let asset = ConsolePage.asset(at: path, token: consoleToken) {
            if gateway.store.current.snapshot.policy.admin?.token == nil, requester.mayBeFromABrowser {
                return problem(
                    .forbidden, "admin-browser-request", "Forbidden",
                    "Without an admin token the console is served to loopback names only (this request names another host).")
            }
            return asset
        }
        // Another site's page may still make the browser fetch without an Origin (an image, a
        // script): browsers say so in Sec-Fetch-Site, and nothing here is for it.
        if requester.fetchSite?.lowercased() == "cross-site" {
            return problem(
                .forbidden, "admin-cross-site", "Forbidden",
                "A request from a web page must come from this listener's console, with its token.")
        }
        // A browser's request (it carries an Origin) must be the console's own: same origin, and
        // the page's token, which a page of another site cannot read.
        let fromConsole =
            requester.isSameOrigin
            && requester.consoleToken.map { ConstantTime.equal(Array($0.utf8), Array(consoleToken.utf8)) } == true
        if requester.origin != nil, !fromConsole {
            return problem(
                .forbidden, "admin-cross-site", "Forbidden",
                "A request from a web page must come from this listener's console, with its token.")
        }
        // Without a token, the loopback listener trusts whoever can reach it: local tools. A web
        // page open on this host can reach it too (a form POST needs no preflight), so anything
        // that looks like a browser's request is refused unless a token vouches for it.
        if gateway.store.current.snapshot.policy.admin?.token == nil, fromConsole ? !requester.namesLoopback : requester.mayBeFromABrowser {
            return problem(
                .forbidden, "admin-browser-request", "Forbidden",
                "The admin API answers local tools: this request carries an Origin or names a host that is not loopback.")
        }
        guard authorized(authorization) else {
            var response = problem(.unauthorized, "unauthorized", "Unauthorized", "This admin endpoint needs a valid bearer token.")
            response.headers.append(("WWW-Authenticate", "Bearer realm=\"portico-admin\""))
            return response
        }
        switch (path, method) {
        case ("/healthz", .GET):
            return json(.ok, ["status": "ok"])
        case ("/readyz", .GET):
            return gateway.isReady
                ? json(.ok, ["status": "ready", "generation": String(gateway.store.revision.generation)])
                : json(.serviceUnavailable, ["status": gateway.isDraining ? "draining" : "starting"])
        case ("/metrics", .GET):
            var backends = ""
            BackendsReport(gateway.store.current).render(into: &backends)
            if requester.accept?.contains("application/openmetrics-text") == true {
                let text = gateway.metrics.renderOpenMetrics(adding: backends)
                return Response(
                    status: .ok, contentType: "application/openmetrics-text; version=1.0.0; charset=utf-8", body: Array(text.utf8))
            }
            let text = gateway.metrics.render() + backends
            return Response(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: Array(text.utf8))
        case ("/admin/backends", .GET):
            return encoded(.ok, BackendsReport(gateway.store.current))
        case ("/admin/console", .GET):
            return encoded(.ok, await ConsoleState.read(gateway))
        case ("/admin/policy", .GET):
            return encoded(.ok, AdminPolicyView(gateway.store.current.snapshot.policy, revision: gateway.store.revision))
        case ("/admin/reload", .POST):
            guard let reloader else {
                return problem(
                    .notFound, "not-found", "Not found", "This gateway was not started from a policy directory, so it cannot reload.")
            }
            let dryRun = query.contains { $0.name == "dryRun" && ($0.value == "true" || $0.value == "1") }
            let outcome = await reloader.reload(dryRun: dryRun)
            return outcome.result == .refused
                ? encoded(.unprocessableEntity, ReloadRefusal(outcome), contentType: "application/problem+json")
                : encoded(.ok, ReloadReport(outcome))
        case ("/admin/cache", .GET):
            let usage = gateway.cache.usage
            let bounds = gateway.store.current.snapshot.policy.cache ?? CachePolicy()
            return encoded(
                .ok, ["bytes": usage.bytes, "entries": usage.entries, "maxBytes": bounds.maxBytes, "maxObjectBytes": bounds.maxObjectBytes])
        case ("/admin/cache/purge", .POST):
            switch CachePurge.selector(query, in: gateway.store.current) {
            case .success(let selector):
                var purged = gateway.cache.purge(selector)
                // In fleet mode: the fleet's store too, and every gateway's memory (through the purge stream).
                if let shared = gateway.cache.shared {
                    let policy = gateway.store.current.snapshot.policy
                    var versions: [Int] = []
                    if case .target(let service, _) = selector { versions = policy.services[service].map { Array($0.versions.keys) } ?? [] }
                    let loop = gateway.eventLoopGroup.next()
                    let services = Array(policy.services.keys)
                    if let remote = try? await loop.flatSubmit({ shared.purge(selector, versions: versions, services: services, on: loop) })
                        .get()
                    {
                        purged = max(purged, remote)
                    }
                }
                return encoded(.ok, ["purged": purged])
            case .failure(let reason): return problem(.badRequest, "bad-request", "Bad request", reason.description)
            }
        case ("/healthz", _), ("/readyz", _), ("/metrics", _), ("/admin/policy", _), ("/admin/backends", _), ("/admin/cache", _),
            ("/admin/console", _), ("/", _), ("/console/console.css", _), ("/console/console.js", _):
            var response = problem(.methodNotAllowed, "method-not-allowed", "Method not allowed", "Use GET.")
            response.headers.append(("Allow", "GET"))
            return response
        case ("/admin/reload", _), ("/admin/cache/purge", _):
            var response = problem(.methodNotAllowed, "method-not-allowed", "Method not allowed", "Use POST.")
            response.headers.append(("Allow", "POST"))
            return response
        default:
            return problem(.notFound, "not-found", "Not found", "No admin endpoint at this path.")
        }
    }

    /// Whether the request may proceed: no token configured on loopback, or the right token.
    private func authorized(_ authorization: String?) -> Bool {
        let token = gateway.store.current.snapshot.policy.admin?.token
        guard let token else { return AdminPolicy.isLoopback(boundAddress) }
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return false }
        let presented = Array(authorization.dropFirst(7).utf8)
        let digest = OpenSSLDigest()
        let expected = token.bytes.withUnsafeBytes { digest.digest(.sha256, of: $0) }
        let given = presented.withUnsafeBytes { digest.digest(.sha256, of: $0) }
        return ConstantTime.equal(given, expected)
    }

    static func split(_ uri: String) -> (path: String, query: [(name: String, value: String)]) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, []) }
        let query = uri[uri.index(after: mark)...].split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
        return (String(uri[..<mark]), query)
    }

    private func json(_ status: HTTPResponseStatus, _ object: [String: String]) -> Response {
        encoded(status, object)
    }

    private func encoded(_ status: HTTPResponseStatus, _ value: some Encodable, contentType: String = "application/json") -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        let body = (try? encoder.encode(value)).map(Array.init) ?? Array("{}".utf8)
        return Response(status: status, contentType: contentType, body: body + [UInt8(ascii: "\n")])
    }

    private func problem(_ status: HTTPResponseStatus, _ type: String, _ title: String, _ detail: String) -> Response {
        encoded(
            status, AdminProblem(type: Problem.typePrefix + type, title: title, status: Int(status.code), detail: detail),
            contentType: "application/problem+json")
    }
}

private struct AdminProblem: Encodable {
    let type: String
    let title: String
    let status: Int
    let detail: String
}

/// The active revision as JSON.
struct RevisionView: Encodable {
    let generation: UInt64
    let hash: String
    let loadedAt: String

    init(_ revision: PolicyRevision) {
        generation = revision.generation
        hash = revision.contentHash
        loadedAt = revision.loadedAt.adminTimestamp
    }
}

/// A diff as JSON: per section, `added`, `removed`, `changed`.
struct DiffView: Encodable {
    let sections: [PolicyDiff.Section]

    struct Entry: Encodable {
        let added: [String]
        let removed: [String]
        let changed: [String]
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        for section in sections {
            try container.encode(
                Entry(added: section.added, removed: section.removed, changed: section.changed), forKey: AnyKey(section.name))
        }
    }
}

struct AnyKey: CodingKey {
    let stringValue: String
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

/// What a reload or dry run answers with (200).
struct ReloadReport: Encodable {
    let result: String
    let dryRun: Bool
    let applied: Bool
    let generation: UInt64
    let hash: String
    let changes: DiffView
    let restartRequired: [String]
    let warnings: [String]

    init(_ outcome: ReloadOutcome) {
        result = outcome.result == .dryRun ? "dry-run" : outcome.result.rawValue
        dryRun = outcome.result == .dryRun
        applied = outcome.result == .applied
        generation = outcome.revision.generation
        hash = outcome.revision.contentHash
        changes = DiffView(sections: outcome.diff?.sections ?? [])
        restartRequired = outcome.restartRequired
        warnings = outcome.warnings.map(\.description)
    }
}

/// A refused reload (422, problem+json) with every diagnostic.
struct ReloadRefusal: Encodable {
    struct Error: Encodable {
        let file: String
        let line: Int?
        let keyPath: String
        let message: String
    }

    let type = Problem.typePrefix + "policy-invalid"
    let title = "Policy refused"
    let status = 422
    let detail: String
    /// The generation still active.
    let generation: UInt64
    let errors: [Error]

    init(_ outcome: ReloadOutcome) {
        detail = "The policy does not validate (\(outcome.errors.count) error(s)); the active policy is unchanged."
        generation = outcome.revision.generation
        errors = outcome.errors.map { Error(file: $0.file, line: $0.line, keyPath: $0.keyPath, message: $0.message) }
    }
}

/// `/admin/policy`: what is active, by name, with no secret: keys appear by id and status only.
struct AdminPolicyView: Encodable {
    struct Service: Encodable {
        let path: String
        let host: String?
        let auth: String
        let versions: [String: String]
        let defaultVersion: String
        let addressRateLimit: String?
        /// The compatibility buckets, in policy order: `<range> → <version>`, with `on <platforms>`
        /// for a platform's own.
        let buckets: [String]
        let minimumClientVersion: String?
    }

    struct Backend: Encodable {
        let url: String
        /// Every target with its weight, for a backend of several (`url` is the first's).
        let targets: [String]?
        let balance: String?
        let client: String?
        let rateLimit: String?
        let maxConcurrent: Int?
        let retries: String?
    }

    struct Tier: Encodable {
        let limit: String
        let services: [String: String]
        let nonceQuota: Int?
    }

    struct Key: Encodable {
        let status: String
        let tier: String?
        let services: [String]
        let rotating: Bool
    }

    /// Fleet mode's Redis: where, and what happens when it fails; the password only as `set`.
    struct Cluster: Encodable {
        let redis: String
        let database: Int
        let password: String
        let timeout: String
        let onFailure: [String: String]
    }

    let revision: RevisionView
    let services: [String: Service]
    let backends: [String: Backend]
    let tiers: [String: Tier]
    let keys: [String: Key]
    let cluster: Cluster?

    init(_ policy: Policy, revision: PolicyRevision) {
        self.revision = RevisionView(revision)
        services = policy.services.mapValues { service in
            Service(
                path: service.path, host: service.host, auth: service.authDescription,
                versions: Dictionary(
                    uniqueKeysWithValues: service.versions.map { number, version in
                        switch version.handler {
                        case .proxy(let proxy): (String(number), "proxy \(proxy.backend)")
                        case .facade(let facade):
                            (String(number), "facade \(facade.active ?? "aggregate " + facade.aggregate.joined(separator: "+"))")
                        case .code(let code): (String(number), "code \(code.name)")
                        }
                    }),
                defaultVersion: service.defaultVersionName,
                addressRateLimit: service.addressRateLimit?.description,
                buckets: service.compatibility.map { bucket in
                    let platforms = bucket.platforms.isEmpty ? "" : " on " + bucket.platforms.joined(separator: ",")
                    return "\(bucket.clients)\(platforms) → \(bucket.version)"
                },
                minimumClientVersion: service.minimumClientVersion.map { "\($0)" })
        }
        // The backend's URL is the operator's own; it is not a secret (a URL with credentials is refused).
        backends = policy.backends.mapValues {
            Backend(
                url: $0.url.description, targets: $0.targets.count > 1 ? $0.targets.map { "\($0.url) weight \($0.weight)" } : nil,
                balance: $0.targets.count > 1 ? $0.balance.rawValue : nil, client: $0.client?.rawValue,
                rateLimit: $0.rateLimit?.description, maxConcurrent: $0.maxConcurrent,
                retries: $0.retries.map { "\($0.attempts) attempts on \($0.on.sorted().map(\.rawValue).joined(separator: ","))" })
        }
        tiers = policy.tiers.mapValues {
            Tier(limit: $0.limit.description, services: $0.services.mapValues(\.description), nonceQuota: $0.nonceQuota)
        }
        keys = policy.keys.mapValues {
            Key(status: $0.status.rawValue, tier: $0.tier, services: $0.services, rotating: $0.previousSecret != nil)
        }
        cluster = policy.cluster.map { cluster in
            let (seconds, attoseconds) = cluster.timeout.components
            return Cluster(
                redis: cluster.redis.description, database: cluster.database, password: cluster.password == nil ? "none" : "set",
                timeout: "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000)ms",
                onFailure: ["limits": cluster.onFailure.limits.rawValue, "nonces": cluster.onFailure.nonces.rawValue])
        }
    }
}

extension ServicePolicy {
    /// `latest`, or the default version's number: as `/admin/policy` and the console show it.
    var defaultVersionName: String {
        switch defaultVersion {
        case .latest: "latest"
        case .version(let number): String(number)
        }
    }
}
