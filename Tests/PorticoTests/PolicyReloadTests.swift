import Foundation
import NIOConcurrencyHelpers
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

@Suite("Policy reload: one path for SIGHUP and the admin API, a dry run, refusals")
struct PolicyReloadTests {
    static let secretOne = "k1-secret-0123456789abcdefghijklmnopqrstuvwxyz"
    static let secretTwo = "k2-secret-0123456789abcdefghijklmnopqrstuvwxyz"

    /// Two backends (`alpha`, `beta`), an `apiKey` service `svc` and an open service `other`, two
    /// keys of tier `standard`. `beta`'s rate limit is there to be diffed and reloaded, far above
    /// what the load tests send, so that no burst after a stall on a loaded machine meets it.
    static func files(_ ports: [Int]) -> [String: String] {
        [
            "backends.yaml": """
            backends:
              alpha: { url: "http://127.0.0.1:\(ports[0])" }
              beta: { url: "http://127.0.0.1:\(ports[1])", rateLimit: { rate: 1000000/s, burst: 100000 } }
            """,
            "services.yaml": """
            services:
              svc:
                path: /svc
                auth: apiKey
                versions:
                  1: { proxy: { backend: alpha } }
              other:
                path: /other
                versions:
                  1: { proxy: { backend: beta } }
            """,
            "keys.yaml": keysFile(k2: true, k1Status: "active"),
            "k1.secret": secretOne,
            "k2.secret": secretTwo,
        ]
    }

    static func keysFile(k2: Bool, k1Status: String, rate: String = "100/s") -> String {
        var text = """
            tiers:
              standard: { rate: \(rate), burst: 50 }
            keys:
              k1: { secretFile: k1.secret, status: \(k1Status), services: ["*"], tier: standard }

            """
        if k2 { text += "  k2: { secretFile: k2.secret, services: [svc], tier: standard }\n" }
        return text
    }

    @Test("a dry run reports exactly the differences made, and changes nothing; the reload then applies them")
    func dryRun() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, servers in
            let before = gateway.gateway.store.revision
            // Added: service `extra`, version svc/2, beta's maxConcurrent, svc's buckets and minimum
            // client version. Removed: key k2. Changed: tier standard's rate; backend beta (its
            // maxConcurrent).
            try gateway.write(
                "services.yaml",
                """
                services:
                  svc:
                    path: /svc
                    auth: apiKey
                    versions:
                      1: { proxy: { backend: alpha } }
                      2: { proxy: { backend: beta } }
                    compatibility:
                      - { clients: "<2.0.0", version: 1 }
                      - { clients: ">=2.0.0", version: 2 }
                    minimumClientVersion: 1.0.0
                  other:
                    path: /other
                    versions:
                      1: { proxy: { backend: beta } }
                  extra:
                    path: /extra
                    versions:
                      1: { proxy: { backend: alpha } }
                """)
            try gateway.write("keys.yaml", Self.keysFile(k2: false, k1Status: "active", rate: "200/s"))
            try gateway.write(
                "backends.yaml",
                """
                backends:
                  alpha: { url: "http://127.0.0.1:\(servers[0].port)" }
                  beta: { url: "http://127.0.0.1:\(servers[1].port)", rateLimit: { rate: 1000000/s, burst: 100000 }, maxConcurrent: 8 }
                """)
            let expected: [String: [String: [String]]] = [
                "services": ["added": ["extra"], "removed": [], "changed": []],
                "versions": ["added": ["extra/1", "svc/2"], "removed": [], "changed": []],
                "buckets": ["added": ["svc.minimumClientVersion", "svc: <2.0.0", "svc: >=2.0.0"], "removed": [], "changed": []],
                "keys": ["added": [], "removed": ["k2"], "changed": []],
                "limits": ["added": ["backends.beta.maxConcurrent"], "removed": [], "changed": ["tiers.standard"]],
                "backends": ["added": [], "removed": [], "changed": ["beta"]],
                "settings": ["added": [], "removed": [], "changed": []],
                "facades": ["added": [], "removed": [], "changed": []],
            ]

            let dry = try await offThePool { try gateway.adminRequest("POST", "/admin/reload?dryRun=true") }
            #expect(dry.status == 200, "\(dry.bodyText)")
            let report = try #require(dry.json)
            #expect(report["result"] as? String == "dry-run")
            #expect(report["applied"] as? Bool == false)
            #expect(report["generation"] as? Int == 0)
            #expect(report["changes"] as? [String: [String: [String]]] == expected)
            // Nothing moved: same revision, and the new service is not routed.
            #expect(gateway.gateway.store.revision == before)
            let client = try RawHTTPClient(port: gateway.port)
            #expect(try client.request("GET", "/extra/x").status == 404)

            let real = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(real.status == 200, "\(real.bodyText)")
            let applied = try #require(real.json)
            #expect(applied["result"] as? String == "applied")
            #expect(applied["generation"] as? Int == 1)
            #expect(applied["changes"] as? [String: [String: [String]]] == expected)
            #expect(applied["hash"] as? String != before.contentHash)
            #expect(gateway.gateway.store.revision.generation == 1)
            let routed = try client.request("GET", "/extra/x")
            #expect(routed.status == 200)
            #expect(routed.bodyText == "alpha")
            // The active policy reports the new buckets.
            let active = try await offThePool { try gateway.adminRequest("GET", "/admin/policy") }
            let svc = (active.json?["services"] as? [String: [String: Any]])?["svc"]
            #expect(svc?["buckets"] as? [String] == ["<2.0.0 → 1", ">=2.0.0 → 2"])
            #expect(svc?["minimumClientVersion"] as? String == "1.0.0")
            // k2 is gone: its secret no longer opens svc.
            let removed = try client.request("GET", "/svc/x", headers: [("X-API-Key", "k2.\(Self.secretTwo)")])
            #expect(removed.status == 401)
        }
    }

    @Test("revoking a key by reload: its next request, on the same connection, gets 403")
    func revokeKey() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, _ in
            let client = try RawHTTPClient(port: gateway.port)
            let key = [("X-API-Key", "k1.\(Self.secretOne)")]
            #expect(try client.request("GET", "/svc/a", headers: key).status == 200)

            try gateway.write("keys.yaml", Self.keysFile(k2: true, k1Status: "revoked"))
            let reload = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(reload.status == 200, "\(reload.bodyText)")
            let changes = try #require(reload.json?["changes"] as? [String: [String: [String]]])
            #expect(changes["keys"]?["changed"] == ["k1"])

            let refused = try client.request("GET", "/svc/a", headers: key)
            #expect(refused.status == 403)
            #expect(refused.json?["type"] as? String == "urn:portico:problem:key-revoked")
            // The other key is untouched.
            #expect(try client.request("GET", "/svc/a", headers: [("X-API-Key", "k2.\(Self.secretTwo)")]).status == 200)
        }
    }

    @Test("a broken policy pushed mid-load is refused with 422 naming every error; traffic and the generation are unaffected")
    func brokenPolicyMidLoad() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, _ in
            let load = LoadGenerator(port: gateway.port, connections: 4, target: "/other/x", accepted: ["beta"])
            load.start()
            // Some traffic before the push, so the load is under way when it lands.
            #expect(await eventually { load.completed >= 40 })

            try gateway.write(
                "services.yaml",
                """
                services:
                  svc:
                    path: svc-without-slash
                    auth: apiKey
                    versions:
                      1: { proxy: { backend: gamma } }
                  other:
                    path: /other
                    versions:
                      1: { proxy: { backend: beta } }
                """)
            let refused = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(refused.status == 422)
            #expect(refused.header("content-type") == "application/problem+json")
            let problem = try #require(refused.json)
            #expect(problem["type"] as? String == "urn:portico:problem:policy-invalid")
            #expect(problem["generation"] as? Int == 0)
            let errors = try #require(problem["errors"] as? [[String: Any]])
            let located = Set(
                errors.map { "\(($0["file"] as? String ?? "").split(separator: "/").last ?? ""):\($0["keyPath"] as? String ?? "")" })
            // The service's two mistakes, and the key that names the service they broke.
            #expect(
                located == [
                    "services.yaml:services.svc.path", "services.yaml:services.svc.versions.1.proxy.backend",
                    "keys.yaml:keys.k2.services.0",
                ])
            #expect(errors.allSatisfy { !($0["message"] as? String ?? "").isEmpty })

            let policy = try await offThePool { try gateway.adminRequest("GET", "/admin/policy") }
            #expect((policy.json?["revision"] as? [String: Any])?["generation"] as? Int == 0)
            let during = load.completed
            #expect(await eventually { load.completed >= during + 40 })
            let result = await load.stop()
            #expect(result.failures == [])
            #expect(result.connectionsLost == 0)
            #expect(gateway.gateway.metrics.render().contains(#"portico_policy_reloads_total{result="refused"} 1"#))
        }
    }

    @Test("concurrent admin reloads each install once and report the generation they installed")
    func concurrentReloads() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, _ in
            let generations = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        let response = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
                        return response.json?["generation"] as? Int ?? -1
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(generations.sorted() == Array(1...6))
            #expect(gateway.gateway.store.revision.generation == 6)
        }
    }

    @Test("a reload that changes a listener's certificate: new connections get it, open ones keep theirs; no restart needed")
    func certificateChangesWithPolicy() async throws {
        let gatewayFile = { (certificate: String) in
            """
            listeners:
              - { name: test, address: 127.0.0.1, port: 0, tls: \(TestCertificates.listenerTLS(certificate)) }
            accessLog: { enabled: false }
            admin: { address: 127.0.0.1, port: 0 }
            """
        }
        try await withReloadableGateway(
            backends: [namedBackend("alpha"), namedBackend("beta")],
            files: { ports in Self.files(ports).merging(["gateway.yaml": gatewayFile("localhost")]) { $1 } }
        ) { gateway, _ in
            let port = gateway.port
            // The other certificate is not for "localhost": the client does not verify the name.
            let connect: @Sendable () throws -> TLSTestClient = {
                var options = TLSTestClient.Options()
                options.caFile = nil
                return try TLSTestClient(port: port, options: options)
            }
            let open = try await offThePool(connect)
            #expect(open.serverSubject == "CN=localhost")

            try gateway.write("gateway.yaml", gatewayFile("other"))
            let reload = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(reload.status == 200, "\(reload.bodyText)")
            let report = try #require(reload.json)
            #expect((report["changes"] as? [String: [String: [String]]])?["settings"]?["changed"] == ["listeners"])
            #expect(report["restartRequired"] as? [String] == [])

            let fresh = try await offThePool(connect)
            #expect(fresh.serverSubject == "CN=other.test")
            let answer = try await offThePool { try fresh.request("GET", "/other/x").status }
            #expect(answer == 200)
            let answer2 = try await offThePool { try open.request("GET", "/other/x").status }
            #expect(answer2 == 200)
            #expect(open.serverSubject == "CN=localhost")
        }
    }

    @Test("a reload whose certificate cannot be used is refused whole: the key it also revokes stays active")
    func brokenCertificateRefusesEverything() async throws {
        try await withReloadableGateway(
            backends: [namedBackend("alpha"), namedBackend("beta")], tls: TestCertificates.listenerTLS("localhost"), files: Self.files
        ) { gateway, _ in
            let port = gateway.port
            try gateway.write(
                "gateway.yaml",
                """
                listeners:
                  - { name: test, address: 127.0.0.1, port: 0, tls: { certificate: "\(TestCertificates.path("renewed.pem"))", privateKey: "\(TestCertificates.path("other-key.pem"))" } }
                accessLog: { enabled: false }
                admin: { address: 127.0.0.1, port: 0 }
                """)
            try gateway.write("keys.yaml", Self.keysFile(k2: true, k1Status: "revoked"))
            let dry = try await offThePool { try gateway.adminRequest("POST", "/admin/reload?dryRun=true") }
            #expect(dry.status == 422)
            let refused = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(refused.status == 422)
            let errors = try #require(refused.json?["errors"] as? [[String: Any]])
            #expect(errors.count == 1)
            #expect((errors.first?["message"] as? String)?.contains("does not match") == true)
            #expect((errors.first?["keyPath"] as? String)?.hasPrefix("listeners.0.tls") == true)
            #expect(gateway.gateway.store.revision.generation == 0)
            let status = try await offThePool {
                try TLSTestClient(port: port).request("GET", "/svc/x", headers: [("X-API-Key", "k1.\(Self.secretOne)")]).status
            }
            #expect(status == 200)
        }
    }

    @Test("what outlives a reload: a used-up rate limit, a seen nonce, the pooled backend connection")
    func stateSurvivesReload() async throws {
        let files = { (ports: [Int], extraService: Bool) -> [String: String] in
            [
                "backends.yaml": """
                backends:
                  alpha: { url: "http://127.0.0.1:\(ports[0])", rateLimit: { rate: 2/h, burst: 2 } }
                """,
                "services.yaml": """
                services:
                  signed: { path: /signed, auth: signature, versions: { 1: { proxy: { backend: alpha } } } }
                \(extraService ? "  extra: { path: /extra, versions: { 1: { proxy: { backend: alpha } } } }" : "")
                """,
                "keys.yaml": """
                keys:
                  k1: { secretFile: k1.secret, services: ["*"] }
                """,
                "k1.secret": Self.secretOne,
            ]
        }
        try await withReloadableGateway(backends: [namedBackend("alpha")], files: { files($0, false) }) { gateway, servers in
            let signer = TestSigner(keyID: "k1", secret: Self.secretOne)
            let client = try RawHTTPClient(port: gateway.port)
            let replayed = try signer.headers("GET", "/signed/a", nonce: "nonce-before-reload")
            #expect(try client.request("GET", "/signed/a", headers: replayed).status == 200)

            for (name, text) in files([servers[0].port], true) { try gateway.write(name, text) }
            let reload = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(reload.status == 200)
            #expect((reload.json?["changes"] as? [String: [String: [String]]])?["services"]?["added"] == ["extra"])

            // The nonce is still known: the same signature is a replay.
            let replay = try client.request("GET", "/signed/a", headers: replayed)
            #expect(replay.status == 401)
            #expect(replay.json?["type"] as? String == "urn:portico:problem:signature-replayed")
            // The backend's limit (2 an hour, unchanged) kept its count: one more, then 429.
            #expect(try client.request("GET", "/signed/b", headers: try signer.headers("GET", "/signed/b")).status == 200)
            let limited = try client.request("GET", "/signed/c", headers: try signer.headers("GET", "/signed/c"))
            #expect(limited.status == 429)
            #expect(limited.json?["limit"] as? String == "backend")
            // Every request reached the backend over the one pooled connection.
            #expect(servers[0].connectionsAccepted == 1)
            #expect(servers[0].requestsReceived == 2)
        }
    }

    @Test("a reload whose locator signing key cannot be read is refused, naming the key")
    func unreadableLocatorKey() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, _ in
            try gateway.write("locator.yaml", "locator: { publicBaseURL: \"https://gateway.test\", signingKey: no-such-key.pem }")
            let refused = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(refused.status == 422, "\(refused.bodyText)")
            let errors = try #require(refused.json?["errors"] as? [[String: Any]])
            #expect(errors.map { $0["keyPath"] as? String } == ["locator.signingKey"])
            #expect((errors.first?["file"] as? String)?.hasSuffix("locator.yaml") == true)
            #expect(gateway.gateway.store.revision.generation == 0)
        }
    }

    @Test("the directory watch reloads a changed policy once, and reports a broken one once")
    func watchReloadsChanges() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: Self.files) { gateway, _ in
            #expect(await gateway.reloader.reloadIfChanged() == nil)  // the files are the active policy

            try gateway.write("keys.yaml", Self.keysFile(k2: false, k1Status: "active"))
            let applied = try #require(await gateway.reloader.reloadIfChanged())
            #expect(applied.result == .applied)
            #expect(applied.diff?["keys"]?.removed == ["k2"])
            #expect(await gateway.reloader.reloadIfChanged() == nil)

            try gateway.write("keys.yaml", "keys: [")
            let refused = try #require(await gateway.reloader.reloadIfChanged())
            #expect(refused.result == .refused)
            #expect(refused.errors.first?.file.hasSuffix("keys.yaml") == true)
            // The same broken files are not tried again at every look.
            #expect(await gateway.reloader.reloadIfChanged() == nil)
            #expect(gateway.gateway.store.revision.generation == 1)

            try gateway.write("keys.yaml", Self.keysFile(k2: true, k1Status: "active"))
            #expect(try #require(await gateway.reloader.reloadIfChanged()).result == .applied)
            #expect(gateway.gateway.store.revision.generation == 2)
        }
    }

    @Test("reload under load: 32 keep-alive TLS connections for 10 s, 20 reloads alternating two policies, nothing fails")
    func reloadUnderLoad() async throws {
        // Policy A sends /svc to alpha, policy B to beta: every answer must be one of the two.
        let serviceFile = { (backend: String) in
            """
            services:
              svc:
                path: /svc
                versions:
                  1: { proxy: { backend: \(backend) } }
            """
        }
        try await withReloadableGateway(
            backends: [namedBackend("alpha"), namedBackend("beta")], tls: TestCertificates.listenerTLS("localhost"),
            files: { ports in
                [
                    "backends.yaml": """
                    backends:
                      alpha: { url: "http://127.0.0.1:\(ports[0])" }
                      beta: { url: "http://127.0.0.1:\(ports[1])" }
                    """,
                    "services.yaml": serviceFile("alpha"),
                ]
            }
        ) { gateway, _ in
            let load = LoadGenerator(port: gateway.port, connections: 32, target: "/svc/x", accepted: ["alpha", "beta"], tls: true)
            let start = ContinuousClock.now
            load.start()
            var generations: [Int] = []
            for reload in 1...20 {
                // Spread over the 10 s.
                try await Task.sleep(until: start + .milliseconds(450 * reload))
                try gateway.write("services.yaml", serviceFile(reload % 2 == 1 ? "beta" : "alpha"))
                let response = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
                #expect(response.status == 200, "\(response.bodyText)")
                generations.append(response.json?["generation"] as? Int ?? -1)
            }
            try await Task.sleep(until: start + .seconds(10))
            let result = await load.stop()
            #expect(generations == Array(1...20))
            #expect(result.failures == [])
            #expect(result.connectionsLost == 0)
            // Every connection worked throughout, and both policies answered.
            #expect(result.perConnection.allSatisfy { $0 > 0 })
            #expect(result.bodies == ["alpha", "beta"])
            #expect(gateway.gateway.store.revision.generation == 20)
        }
    }
}

/// Keep-alive clients that send requests back to back, each on a thread of its own, until
/// stopped; every answer must be 200 with one of the `accepted` bodies.
final class LoadGenerator: Sendable {
    struct Result {
        var failures: [String]
        var connectionsLost: Int
        var perConnection: [Int]
        var bodies: Set<String>
    }

    let port: Int
    let connections: Int
    let target: String
    let accepted: Set<String>
    let tls: Bool
    private let state = NIOLockedValueBox(State())

    private struct State {
        var stopping = false
        var finished = 0
        var completed = 0
        var failures: [String] = []
        var lost = 0
        var perConnection: [Int] = []
        var bodies: Set<String> = []
        var done: CheckedContinuation<Void, Never>?
    }

    init(port: Int, connections: Int, target: String, accepted: Set<String>, tls: Bool = false) {
        self.port = port
        self.connections = connections
        self.target = target
        self.accepted = accepted
        self.tls = tls
    }

    var completed: Int { state.withLockedValue { $0.completed } }

    func start() {
        for _ in 0..<connections {
            Thread.detachNewThread { self.run() }
        }
    }

    private func run() {
        var count = 0
        defer { finish(count) }
        let send: () throws -> RawHTTPClient.Response
        do {
            if tls {
                let client = try TLSTestClient(port: port)
                send = { try client.request("GET", self.target) }
            } else {
                let client = try RawHTTPClient(port: port)
                send = { try client.request("GET", self.target) }
            }
        } catch {
            state.withLockedValue { $0.failures.append("connect: \(error)") }
            return
        }
        while !state.withLockedValue({ $0.stopping }) {
            do {
                let response = try send()
                let body = response.bodyText
                guard response.status == 200, accepted.contains(body) else {
                    state.withLockedValue { $0.failures.append("\(response.status) \(body)") }
                    return
                }
                count += 1
                state.withLockedValue {
                    $0.completed += 1
                    $0.bodies.insert(body)
                }
            } catch {
                state.withLockedValue { $0.lost += 1 }
                return
            }
        }
    }

    private func finish(_ count: Int) {
        let done = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            state.finished += 1
            state.perConnection.append(count)
            guard state.finished == connections else { return nil }
            defer { state.done = nil }
            return state.done
        }
        done?.resume()
    }

    /// Stops every client after its current request and waits for all of them.
    func stop() async -> Result {
        await withCheckedContinuation { continuation in
            let now = state.withLockedValue { state -> Bool in
                state.stopping = true
                guard state.finished < connections else { return true }
                state.done = continuation
                return false
            }
            if now { continuation.resume() }
        }
        return state.withLockedValue {
            Result(failures: $0.failures, connectionsLost: $0.lost, perConnection: $0.perConnection, bodies: $0.bodies)
        }
    }
}

@Suite("What a reload leaves for a restart")
struct RestartRequiredTests {
    static func policy(tls: Bool) throws -> Policy {
        try TestGateway.snapshot(policy: "services: {}\n", tls: tls ? TestCertificates.listenerTLS("localhost") : nil).policy
    }

    @Test("turning TLS on or off for a listener waits for a restart, and is reported so; the same TLS setting is not")
    func tlsOnOrOff() throws {
        let plain = try Self.policy(tls: false)
        let secure = try Self.policy(tls: true)
        #expect(PolicyReloader.restartRequired(from: plain, to: secure) == ["listeners"])
        #expect(PolicyReloader.restartRequired(from: secure, to: plain) == ["listeners"])
        #expect(PolicyReloader.restartRequired(from: secure, to: secure) == [])
        #expect(PolicyReloader.restartRequired(from: plain, to: plain) == [])
    }
}
