import Foundation
import PorticoDemoBackends
import PorticoPolicy
import PorticoRedis
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

@Suite("The admin listener: token off loopback, readiness, no secret in its answers")
struct AdminAPITests {
    static let token = "admin-token-0123456789abcdefghijklmnopqrstuvwxyz"

    static func files(_ ports: [Int], admin: String) -> [String: String] {
        var files = PolicyReloadTests.files(ports)
        files["gateway.yaml"] = """
            listeners:
              - { name: test, address: 127.0.0.1, port: 0 }
            accessLog: { enabled: false }
            admin: \(admin)
            """
        files["admin.token"] = token
        return files
    }

    @Test("bound off loopback, every admin request needs the bearer token; a missing or wrong one gets 401")
    func tokenOffLoopback() async throws {
        try await withReloadableGateway(
            backends: [namedBackend("alpha"), namedBackend("beta")],
            files: { Self.files($0, admin: "{ address: 0.0.0.0, port: 0, tokenFile: admin.token }") }
        ) { gateway, _ in
            for path in ["/healthz", "/readyz", "/metrics", "/admin/policy"] {
                let missing = try await offThePool { try gateway.adminRequest("GET", path) }
                #expect(missing.status == 401, "\(path)")
                #expect(missing.header("www-authenticate") == "Bearer realm=\"portico-admin\"")
                #expect(missing.header("content-type") == "application/problem+json")
                let wrong = try await offThePool { try gateway.adminRequest("GET", path, token: String(Self.token.dropLast()) + "X") }
                #expect(wrong.status == 401, "\(path)")
                let prefix = try await offThePool { try gateway.adminRequest("GET", path, token: String(Self.token.prefix(10))) }
                #expect(prefix.status == 401, "\(path)")
                let right = try await offThePool { try gateway.adminRequest("GET", path, token: Self.token) }
                #expect(right.status == 200, "\(path)")
                // The token is never echoed back.
                #expect(!missing.bodyText.contains(Self.token) && !right.bodyText.contains(Self.token))
            }
            let reload = try await offThePool { try gateway.adminRequest("POST", "/admin/reload") }
            #expect(reload.status == 401)
            #expect(gateway.gateway.store.revision.generation == 0)
        }
    }

    @Test("on loopback with no token configured, the admin API answers without one")
    func loopbackWithoutToken() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: PolicyReloadTests.files) {
            gateway, _ in
            let health = try await offThePool { try gateway.adminRequest("GET", "/healthz") }
            #expect(health.status == 200)
            #expect(health.json?["status"] as? String == "ok")
            let wrongMethod = try await offThePool { try gateway.adminRequest("GET", "/admin/reload") }
            #expect(wrongMethod.status == 405)
            #expect(wrongMethod.header("allow") == "POST")
            let unknown = try await offThePool { try gateway.adminRequest("GET", "/admin/nothing") }
            #expect(unknown.status == 404)
            for host in ["localhost", "[::1]:9901", "127.0.0.1"] {
                let answer = try await offThePool { try gateway.adminRequest("GET", "/healthz", host: host) }
                #expect(answer.status == 200, "\(host)")
            }
        }
    }

    @Test("on loopback with no token, what may come from a web page is refused: an Origin, or a Host that is not loopback")
    func loopbackRefusesBrowsers() async throws {
        try await withReloadableGateway(backends: [namedBackend("alpha"), namedBackend("beta")], files: PolicyReloadTests.files) {
            gateway, _ in
            let before = gateway.gateway.store.revision.generation
            // A form on some page posting to the admin API: the browser adds Origin.
            let posted = try await offThePool {
                try gateway.adminRequest("POST", "/admin/reload", headers: [("Origin", "https://attacker.example")])
            }
            #expect(posted.status == 403)
            #expect(posted.header("content-type") == "application/problem+json")
            #expect(gateway.gateway.store.revision.generation == before)
            // DNS rebinding: a public name pointed at 127.0.0.1 keeps that name in Host, including
            // names that start like a loopback address.
            let rebindingHosts = [
                "attacker.example:9901", "127.0.0.1.rebind.attacker.example:9901", "127.0.0.1.nip.io", "localhost.attacker.example",
                "127.attacker.example", "[::1].attacker.example", "localhost.:9901", "127.1:9901",
            ]
            for host in rebindingHosts {
                let rebound = try await offThePool { try gateway.adminRequest("GET", "/admin/policy", host: host) }
                #expect(rebound.status == 403, "\(host)")
                let answer2 = try await offThePool { try gateway.adminRequest("GET", "/metrics", host: host) }
                #expect(answer2.status == 403, "\(host)")
            }
            // A local tool's request still works.
            let answer3 = try await offThePool { try gateway.adminRequest("GET", "/admin/policy") }
            #expect(answer3.status == 200)
        }
    }

    @Test("loopback means an IP literal in a loopback range or exactly localhost, never a name that starts like one")
    func loopbackLiterals() {
        for address in ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost"] {
            #expect(AdminPolicy.isLoopback(address), "\(address)")
        }
        let outside = [
            "127.0.0.1.rebind.attacker.example", "127.attacker.example", "127.1", "0177.0.0.1", "127.0.0.1 ", "localhost.",
            "localhost.attacker.example", "::2", "::ffff:10.0.0.1", "10.0.0.1", "0.0.0.0", "::", "", "128.0.0.1", "1.127.0.0",
        ]
        for address in outside {
            #expect(!AdminPolicy.isLoopback(address), "\(address)")
        }
    }

    @Test("a policy that binds the admin listener off loopback without a token is refused, naming the key path")
    func offLoopbackNeedsToken() throws {
        let text = """
            listeners: [ { name: test, port: 0 } ]
            admin: { address: 0.0.0.0, port: 9901 }
            """
        let error = try #require(throws: PolicyError.self) { try PolicyLoader().load(sources: [(file: "gateway.yaml", text: text)]) }
        #expect(error.diagnostics.map(\.keyPath) == ["admin"])
        #expect(error.diagnostics[0].message.contains("tokenFile"))
    }

    @Test("/admin/policy shows the cluster section with its password only as set")
    func clusterPasswordHidden() async throws {
        let password = "redis-password-0123456789abcdefghijklmnop"
        try await withReloadableGateway(
            backends: [namedBackend("alpha"), namedBackend("beta")],
            files: { ports in
                var files = Self.files(ports, admin: "{ address: 127.0.0.1, port: 0, tokenFile: admin.token }")
                files["cluster.yaml"] = """
                    cluster: { redis: "redis://127.0.0.1:1", passwordFile: redis.password, database: 3, timeout: 20ms }
                    """
                files["redis.password"] = password + "\n"
                return files
            }
        ) { gateway, _ in
            let response = try await offThePool { try gateway.adminRequest("GET", "/admin/policy", token: Self.token) }
            #expect(response.status == 200)
            #expect(!response.bodyText.contains(password))
            #expect(!response.bodyText.contains(String(password.prefix(16))))
            let cluster = try #require(response.json?["cluster"] as? [String: Any])
            #expect(cluster["redis"] as? String == "redis://127.0.0.1:1")
            #expect(cluster["password"] as? String == "set")
            #expect(cluster["database"] as? Int == 3)
            #expect(cluster["timeout"] as? String == "20ms")
            #expect(cluster["onFailure"] as? [String: String] == ["limits": "local", "nonces": "deny"])
            // Nor in anything that dumps the policy or the Redis client's configuration.
            let policy = gateway.gateway.store.current.snapshot.policy
            var dumped = ""
            dump(policy.cluster, to: &dumped)
            dump(gateway.gateway.fleet?.client.configuration, to: &dumped)
            dumped += "\(String(describing: policy.cluster)) \(String(reflecting: gateway.gateway.fleet?.client.configuration))"
            #expect(dumped.contains("127.0.0.1"))
            #expect(!dumped.contains(password), "\(dumped)")
        }
    }

    @Test("/admin/policy lists services, backends, limits and keys by id and status, and no secret of the policy")
    func noSecretInPolicy() async throws {
        let previous = "previous-secret-0123456789abcdefghijklmnopqrstuvwxyz"
        try await withReloadableGateway(
            backends: [namedBackend("alpha"), namedBackend("beta")],
            files: { ports in
                var files = Self.files(ports, admin: "{ address: 127.0.0.1, port: 0, tokenFile: admin.token }")
                files["keys.yaml"] = """
                    tiers:
                      standard: { rate: 100/s, burst: 50 }
                    keys:
                      k1:
                        secretFile: k1.secret
                        services: ["*"]
                        tier: standard
                        previousSecret: { secretFile: previous.secret, expires: 2099-01-01T00:00:00Z }
                      k2: { secretFile: k2.secret, status: revoked, services: [svc] }
                      demo: { secret: demo-inline-secret-0123456789abcdefghijkl, demo: true, services: [other] }
                    """
                files["previous.secret"] = previous
                return files
            }
        ) { gateway, _ in
            let response = try await offThePool { try gateway.adminRequest("GET", "/admin/policy", token: Self.token) }
            #expect(response.status == 200)
            let text = response.bodyText
            for secret in [
                PolicyReloadTests.secretOne, PolicyReloadTests.secretTwo, previous, "demo-inline-secret-0123456789abcdefghijkl", Self.token,
            ] {
                #expect(!text.contains(secret))
                // Nor any long piece of one.
                #expect(!text.contains(String(secret.prefix(16))))
            }
            let policy = try #require(response.json)
            let keys = try #require(policy["keys"] as? [String: [String: Any]])
            #expect(Set(keys.keys) == ["k1", "k2", "demo"])
            #expect(keys["k1"]?["status"] as? String == "active")
            #expect(keys["k1"]?["rotating"] as? Bool == true)
            #expect(keys["k2"]?["status"] as? String == "revoked")
            let services = try #require(policy["services"] as? [String: [String: Any]])
            #expect(services["svc"]?["versions"] as? [String: String] == ["1": "proxy alpha"])
            #expect(services["svc"]?["buckets"] as? [String] == [])
            #expect(Set((policy["backends"] as? [String: Any])?.keys ?? [:].keys) == ["alpha", "beta"])
            #expect((policy["tiers"] as? [String: [String: Any]])?["standard"]?["limit"] as? String == "100/s burst 50")
            let revision = try #require(policy["revision"] as? [String: Any])
            #expect(revision["generation"] as? Int == 0)
            #expect((revision["hash"] as? String)?.count == 64)
        }
    }

    @Test("/readyz answers 200 while serving and 503 once the gateway drains")
    func readinessWhileDraining() async throws {
        try await withReloadableGateway(backends: [{ _ in .hang }, namedBackend("beta")], files: PolicyReloadTests.files) {
            gateway, servers in
            let ready = try await offThePool { try gateway.adminRequest("GET", "/readyz") }
            #expect(ready.status == 200)
            #expect(ready.json?["status"] as? String == "ready")
            // A request in flight keeps the drain going while the test asks.
            let client = try RawHTTPClient(port: gateway.port)
            try client.send("GET /svc/x HTTP/1.1\r\nHost: t\r\nX-API-Key: k1.\(PolicyReloadTests.secretOne)\r\n\r\n")
            #expect(await eventually { servers[0].requestsReceived == 1 })
            let draining = Task { await gateway.gateway.shutdown(gracePeriod: .seconds(5)) }
            #expect(await eventually { gateway.gateway.isDraining })
            let answer = try await offThePool { try gateway.adminRequest("GET", "/readyz") }
            #expect(answer.status == 503)
            #expect(answer.json?["status"] as? String == "draining")
            await draining.value
        }
    }
}
