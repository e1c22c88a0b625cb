import Foundation
import Testing

@testable import PorticoPolicy

@Suite("The admin and access-log sections, and what a reload reports as changed")
struct OperationsPolicyTests {
    static let base = """
        listeners: [{ name: public, port: 0 }]
        backends:
          echo: { url: "http://127.0.0.1:1" }
          other: { url: "http://127.0.0.1:2", rateLimit: { rate: 10/s, burst: 5 } }
        services:
          open: { path: /open, versions: { 1: { proxy: { backend: echo } } } }
          keyed: { path: /keyed, auth: apiKey, versions: { 1: { proxy: { backend: echo } }, 2: { proxy: { backend: other } } } }
        tiers:
          standard: { rate: 50/s, burst: 20 }
        keys:
          app: { secretEnv: PORTICO_OPS_TEST_SECRET, services: ["*"], tier: standard }

        """

    /// The loader with the environment the base policy's key reads its secret from.
    static let loader = PolicyLoader(environment: ["PORTICO_OPS_TEST_SECRET": "0123456789abcdefghijklmnopqrstuvwxyzABCD"])

    static func load(_ extra: String, base: String = base) throws(PolicyError) -> Policy {
        return try loader.load(sources: [(file: "gateway.yaml", text: base + extra)]).policy
    }

    @Test("admin: loopback by default; off loopback it needs tokenFile; a short or missing token file is refused")
    func adminSection() throws {
        let plain = try Self.load("admin: { port: 9901 }")
        #expect(plain.admin == AdminPolicy(address: "127.0.0.1", port: 9901, token: nil))
        #expect(try Self.load("").admin == nil)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-admin-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "short\n".write(toFile: directory + "/short.token", atomically: true, encoding: .utf8)
        try String(repeating: "t", count: 40).write(toFile: directory + "/good.token", atomically: true, encoding: .utf8)
        let withToken = try Self.loader.load(sources: [
            (file: directory + "/gateway.yaml", text: Self.base + "admin: { address: 0.0.0.0, port: 9901, tokenFile: good.token }")
        ]).policy
        #expect(withToken.admin?.token == Secret(String(repeating: "t", count: 40)))

        for (admin, keyPath, words) in [
            ("admin: { address: 10.0.0.1, port: 9901 }", "admin", "tokenFile"),
            ("admin: { port: 9901, tokenFile: short.token }", "admin.tokenFile", "at least 32"),
            ("admin: { port: 9901, tokenFile: missing.token }", "admin.tokenFile", "does not exist"),
            ("admin: { address: 127.0.0.1 }", "admin", "port"),
        ] {
            let error = try #require(throws: PolicyError.self) {
                try Self.loader.load(sources: [(file: directory + "/gateway.yaml", text: Self.base + admin)])
            }
            #expect(error.diagnostics.map(\.keyPath) == [keyPath], "\(admin)")
            #expect(error.diagnostics.first?.message.contains(words) == true, "\(error)")
            // A diagnostic never quotes a token.
            #expect(!error.description.contains("short\n") && !error.description.contains(String(repeating: "t", count: 40)))
        }
    }

    @Test("accessLog.format: json by default, or logfmt; anything else is refused")
    func accessLogFormat() throws {
        #expect(try Self.load("").accessLog.format == .json)
        #expect(try Self.load("accessLog: { format: logfmt }").accessLog.format == .logfmt)
        let error = try #require(throws: PolicyError.self) { try Self.load("accessLog: { format: xml }") }
        #expect(error.diagnostics.map(\.keyPath) == ["accessLog.format"])
    }

    @Test("the diff names what was added, removed and changed in each section, and nothing else")
    func diff() throws {
        let old = try Self.load("")
        let same = PolicyDiff(from: old, to: old)
        #expect(same.isEmpty)
        #expect(same.sections.map(\.name) == ["services", "versions", "buckets", "keys", "limits", "backends", "settings", "facades"])

        var new = old
        let firstVersion = new.services["open"]?.versions[1]
        new.services["open"]?.versions[2] = firstVersion  // a version added: the service itself unchanged
        new.services.removeValue(forKey: "keyed")
        new.keys["app"]?.status = .revoked
        new.tiers["standard"]?.limit.count = 60
        new.backends["other"]?.rateLimit = nil
        new.limits.maxBodyBytes = 1
        let diff = PolicyDiff(from: old, to: new)
        #expect(diff["services"] == .init(name: "services", added: [], removed: ["keyed"], changed: []))
        #expect(diff["versions"] == .init(name: "versions", added: ["open/2"], removed: ["keyed/1", "keyed/2"], changed: []))
        #expect(diff["keys"] == .init(name: "keys", added: [], removed: [], changed: ["app"]))
        #expect(diff["limits"] == .init(name: "limits", added: [], removed: ["backends.other.rateLimit"], changed: ["tiers.standard"]))
        #expect(diff["backends"] == .init(name: "backends", added: [], removed: [], changed: ["other"]))
        #expect(diff["settings"] == .init(name: "settings", added: [], removed: [], changed: ["limits"]))

        // A rotated secret is a change, and the diff shows only the key's id.
        var rotated = old
        rotated.keys["app"]?.secret = Secret("another-secret-0123456789abcdefghijklmnop")
        let rotation = PolicyDiff(from: old, to: rotated)
        #expect(rotation["keys"]?.changed == ["app"])
        #expect(!"\(rotation)".contains("another-secret"))
    }

    @Test("buckets: one that maps to another version is changed, one whose range moved is removed and added")
    func bucketDiff() throws {
        let service = { (buckets: String) in
            """
            listeners: [{ name: public, port: 0 }]
            backends: { echo: { url: "http://127.0.0.1:1" } }
            services:
              quotes:
                path: /quotes
                versions: { 1: { proxy: { backend: echo } }, 2: { proxy: { backend: echo } }, 3: { proxy: { backend: echo } } }
                compatibility:
            \(buckets)
            """
        }
        let old = try Self.loader.load(sources: [
            (
                file: "a.yaml",
                text: service(
                    """
                          - { clients: "<2.0.0", version: 1 }
                          - { clients: ">=2.0.0", version: 2 }
                          - { clients: ">=2.5.0", platforms: [ipad], version: 2 }
                    """)
            )
        ]).policy
        let new = try Self.loader.load(sources: [
            (
                file: "a.yaml",
                text: service(
                    """
                          - { clients: "<3.0.0", version: 1 }
                          - { clients: ">=3.0.0", version: 2 }
                          - { clients: ">=2.5.0", platforms: [ipad], version: 3 }
                    """)
            )
        ]).policy
        let diff = PolicyDiff(from: old, to: new)
        #expect(
            diff["buckets"]
                == .init(
                    name: "buckets", added: ["quotes: <3.0.0", "quotes: >=3.0.0"], removed: ["quotes: <2.0.0", "quotes: >=2.0.0"],
                    changed: ["quotes: >=2.5.0 on ipad"]))
        #expect(diff["services"]?.isEmpty == true)
    }
}
