import Foundation
import Testing

@testable import PorticoPolicy

@Suite("The cluster section (fleet mode)")
struct ClusterPolicyTests {
    static func load(_ extra: String, base: String = OperationsPolicyTests.base) throws(PolicyError) -> Policy {
        try OperationsPolicyTests.load(extra, base: base)
    }

    @Test("without a cluster section nothing is shared; with one, defaults are 50 ms, local limits and closed nonces")
    func defaults() throws {
        #expect(try Self.load("").cluster == nil)
        let cluster = try #require(try Self.load("cluster: { redis: \"redis://10.0.0.7:6380\" }").cluster)
        #expect(cluster.redis == RedisAddress(host: "10.0.0.7", port: 6380))
        #expect(cluster.timeout == .milliseconds(50))
        #expect(cluster.database == 0)
        #expect(cluster.password == nil)
        #expect(cluster.onFailure == ClusterFailurePolicy(limits: .local, nonces: .deny))
        #expect(try Self.load("cluster: { redis: \"redis://redis.internal\" }").cluster?.redis.port == 6379)
        #expect(try Self.load("cluster: { redis: \"redis://[::1]:7000\" }").cluster?.redis == RedisAddress(host: "::1", port: 7000))
    }

    @Test("every setting is read")
    func everySetting() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-cluster-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "s3cret\n".write(toFile: directory + "/redis.password", atomically: true, encoding: .utf8)
        let policy = try OperationsPolicyTests.loader.load(sources: [
            (
                file: directory + "/gateway.yaml",
                text: OperationsPolicyTests.base
                    + "cluster: { redis: \"redis://127.0.0.1:6379\", passwordFile: redis.password, database: 2, timeout: 20ms, onFailure: { limits: deny, nonces: local } }"
            )
        ]).policy
        let cluster = try #require(policy.cluster)
        #expect(cluster.password == Secret("s3cret"))
        #expect(cluster.database == 2)
        #expect(cluster.timeout == .milliseconds(20))
        #expect(cluster.onFailure == ClusterFailurePolicy(limits: .deny, nonces: .local))
    }

    @Test("mistakes are reported with their file and key path")
    func mistakes() throws {
        for (cluster, keyPath, words) in [
            ("cluster: { redis: \"redis://r:6380\", caFile: ca.pem }", "cluster.caFile", "rediss://"),
            ("cluster: { redis: \"rediss://user:pw@r:6380\" }", "cluster.redis", "passwordFile"),
            ("cluster: { redis: \"http://r:6379\" }", "cluster.redis", "rediss://host:port for TLS"),
            ("cluster: { redis: \"redis://user:pw@r:6379\" }", "cluster.redis", "passwordFile"),
            ("cluster: { redis: \"redis://r:99999\" }", "cluster.redis", "1...65535"),
            ("cluster: { redis: \"redis://r:port\" }", "cluster.redis", "port number"),
            ("cluster: { redis: \"redis://:6379\" }", "cluster.redis", "host"),
            ("cluster: { redis: \"redis://r\", database: 16 }", "cluster.database", "0...15"),
            ("cluster: { redis: \"redis://r\", timeout: 30s }", "cluster.timeout", "at most 10s"),
            ("cluster: { redis: \"redis://r\", onFailure: { limits: maybe } }", "cluster.onFailure.limits", "local, allow, deny"),
            ("cluster: { redis: \"redis://r\", onFailure: { nonces: allow } }", "cluster.onFailure.nonces", "deny, local"),
            ("cluster: { redis: \"redis://r\", passwordFile: /nonexistent/portico.pw }", "cluster.passwordFile", "does not exist"),
            ("cluster: { redis: \"redis://r\", pool: 3 }", "cluster.pool", "unknown key"),
            ("cluster: { timeout: 20ms }", "cluster", "redis"),
        ] {
            let error = try #require(throws: PolicyError.self, "\(cluster)") { try Self.load(cluster) }
            #expect(error.diagnostics.map(\.keyPath) == [keyPath], "\(cluster): \(error)")
            #expect(error.diagnostics.allSatisfy { $0.file == "gateway.yaml" })
            #expect(error.diagnostics.first?.message.contains(words) == true, "\(error)")
        }
    }

    @Test("rediss:// is Redis over TLS: the address says so, and caFile is resolved against the policy file")
    func tls() throws {
        let cluster = try #require(
            try Self.load("cluster: { redis: \"rediss://redis.internal:6380\", caFile: certs/redis-ca.pem }").cluster)
        #expect(cluster.redis == RedisAddress(host: "redis.internal", port: 6380, tls: true))
        #expect(cluster.redis.description == "rediss://redis.internal:6380")
        #expect(cluster.caFile?.path == "certs/redis-ca.pem")
        #expect(cluster.caFile?.origin.keyPath == "cluster.caFile")
        let system = try #require(try Self.load("cluster: { redis: \"rediss://[::1]\" }").cluster)
        #expect(system.redis == RedisAddress(host: "::1", port: 6379, tls: true))
        #expect(system.caFile == nil, "the system's CAs")
        #expect(try Self.load("cluster: { redis: \"redis://r\" }").cluster?.redis.tls == false)
    }

    @Test("a shared limit must be one Redis computes exactly: burst × period below 2^53 ns")
    func sharedLimitBound() throws {
        let base = OperationsPolicyTests.base.replacingOccurrences(of: "rate: 50/s, burst: 20", with: "rate: 10/h, burst: 3000")
        #expect(try Self.load("", base: base).cluster == nil, "without a cluster the limit is fine")
        let error = try #require(throws: PolicyError.self) { try Self.load("cluster: { redis: \"redis://r\" }", base: base) }
        #expect(error.diagnostics.map(\.keyPath) == ["cluster"])
        #expect(error.diagnostics.first?.message.contains("tier standard") == true, "\(error)")
        let fine = OperationsPolicyTests.base.replacingOccurrences(of: "rate: 50/s, burst: 20", with: "rate: 10/h, burst: 2000")
        #expect(try Self.load("cluster: { redis: \"redis://r\" }", base: fine).cluster != nil)
    }

    @Test("a reload's diff names the cluster section when it is added or changed")
    func diffed() throws {
        let none = try Self.load("")
        let old = try Self.load("cluster: { redis: \"redis://r\" }")
        let new = try Self.load("cluster: { redis: \"redis://s\" }")
        #expect(PolicyDiff(from: old, to: new)["settings"] == .init(name: "settings", added: [], removed: [], changed: ["cluster"]))
        #expect(PolicyDiff(from: none, to: old)["settings"] == .init(name: "settings", added: ["cluster"], removed: [], changed: []))
    }
}
