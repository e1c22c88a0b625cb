import Testing

@testable import PorticoPolicy

/// What the loader (and so `portico check`) says about compatibility buckets: overlaps are errors,
/// gaps warnings, each naming the exact versions concerned.
@Suite("Compatibility bucket policy")
struct CompatibilityPolicyTests {
    static func service(_ body: String) -> String {
        """
        listeners:
          - { name: public, address: 127.0.0.1, port: 8080 }
        backends:
          b: { url: "http://127.0.0.1:18081" }
        services:
          s:
            path: /api/{version}/s
            versions:
              1: { proxy: { backend: b } }
              2: { proxy: { backend: b } }
              3: { proxy: { backend: b } }
        \(body)
        """
    }

    static func load(_ text: String) -> (errors: [String], warnings: [String]) {
        do {
            let snapshot = try PolicyLoader().load(sources: [(file: "p.yaml", text: text)])
            return ([], snapshot.warnings.map(\.description))
        } catch {
            return (error.diagnostics.map(\.description), [])
        }
    }

    @Test("the issue's buckets load: the ipad bucket may cover what the others do for every platform")
    func issueTable() throws {
        let text = Self.service(
            """
                compatibility:
                  - { clients: "<2.0.0", version: 1 }
                  - { clients: ">=2.0.0 <3.1.0", version: 2 }
                  - { clients: ">=3.1.0", version: 3 }
                  - { clients: ">=2.5.0", platforms: [iPad], version: 3 }
                minimumClientVersion: 1.0.0
            """)
        let snapshot = try PolicyLoader().load(sources: [(file: "p.yaml", text: text)])
        #expect(snapshot.warnings.isEmpty, "\(snapshot.warnings)")
        let service = try #require(snapshot.policy.services["s"])
        #expect(service.compatibility.count == 4)
        #expect(service.compatibility[3].platforms == ["ipad"])
        #expect(service.minimumClientVersion.map(ClientVersion.describe) == "1.0.0")
        #expect(service.missingClientVersion == .default)
    }

    @Test("overlapping buckets are errors naming both buckets and the versions they share")
    func overlaps() {
        let result = Self.load(
            Self.service(
                """
                    compatibility:
                      - { clients: "<2.0.0", version: 1 }
                      - { clients: ">=2.0.0 <3.1.0", version: 2 }
                      - { clients: ">=3.0.0", version: 3 }
                      - { clients: "<=1.5", version: 2 }
                      - { clients: ">=2.5.0", platforms: [ipad, iphone], version: 3 }
                      - { clients: ">=2.0.0 <2.6.0", platforms: [ipad], version: 2 }
                """))
        #expect(
            result.errors == [
                "p.yaml:15: services.s.compatibility.2: overlaps bucket 1 (>=2.0.0 <3.1.0 → 2): versions >=3.0.0 <3.1.0 are in both",
                "p.yaml:16: services.s.compatibility.3: overlaps bucket 0 (<2.0.0 → 1): versions <=1.5.0 are in both",
                "p.yaml:18: services.s.compatibility.5: overlaps bucket 4 (>=2.5.0 → 3) on platform ipad: versions >=2.5.0 <2.6.0 are in both",
            ], "\(result.errors)")
    }

    @Test("gaps are warnings naming the versions no bucket holds, from the minimum up to the highest bucket")
    func gaps() {
        let result = Self.load(
            Self.service(
                """
                    compatibility:
                      - { clients: ">=1.2.0 <2.0.0", version: 1 }
                      - { clients: ">=2.1.0 <3.0.0", version: 2 }
                      - { clients: ">3.0.0 <4.0.0", version: 3 }
                    minimumClientVersion: 1.0.0
                    default: 2
                """))
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(
            result.warnings == [
                "p.yaml:13: services.s.compatibility: versions >=1.0.0 <1.2.0 are in no bucket; they get the default version 2",
                "p.yaml:13: services.s.compatibility: versions >=2.0.0 <2.1.0 are in no bucket; they get the default version 2",
                "p.yaml:13: services.s.compatibility: versions >=3.0.0 <=3.0.0 are in no bucket; they get the default version 2",
            ], "\(result.warnings)")
        // Without a minimum, everything below the lowest bucket is a gap too.
        let unbounded = Self.load(Self.service("    compatibility:\n      - { clients: \">=1.0.0\", version: 1 }"))
        #expect(
            unbounded.warnings == ["p.yaml:13: services.s.compatibility: versions <1.0.0 are in no bucket; they get the default version 3"])
        // Contiguous buckets have no gap; versions above the highest get the default by design.
        let contiguous = Self.load(
            Self.service(
                "    compatibility:\n      - { clients: \"<2.0.0\", version: 1 }\n      - { clients: \">=2.0.0 <3.0.0\", version: 2 }"))
        #expect(contiguous.warnings.isEmpty && contiguous.errors.isEmpty, "\(contiguous)")
    }

    @Test("a bucket below the minimum is a warning: its versions get 426")
    func bucketBelowMinimum() {
        let result = Self.load(
            Self.service(
                """
                    compatibility:
                      - { clients: "<1.0.0", version: 1 }
                      - { clients: ">=1.0.0", version: 2 }
                    minimumClientVersion: 1.0.0
                """))
        #expect(
            result.warnings == [
                "p.yaml:13: services.s.compatibility.0: bucket 0 (<1.0.0) holds only versions below minimumClientVersion 1.0.0, which get 426"
            ])
    }

    @Test("broken buckets and settings are reported with file, line and key path")
    func broken() {
        let result = Self.load(
            Self.service(
                """
                    compatibility:
                      - { clients: ">=2 >=3", version: 1 }
                      - { clients: "~2.0", version: 2 }
                      - { clients: ">=3.0.0", version: 7 }
                      - { clients: "<1.0", platforms: [], version: 1 }
                      - { clients: ">=9.0", platform: ipad, version: 1 }
                    minimumClientVersion: one
                    missingClientVersion: fail
                clients: { versionHeader: "X Version", platformHeader: x-client-platform }
                """))
        #expect(
            result.errors == [
                "p.yaml:13: services.s.compatibility.0.clients: the range \">=2 >=3\" has more than one lower bound",
                "p.yaml:14: services.s.compatibility.1.clients: the range \"~2.0\" has \"~2.0\", which is not a comparator such as >=2.0.0 or <3.1",
                "p.yaml:15: services.s.compatibility.2.version: version 7 is not one of this service's versions (1, 2, 3)",
                "p.yaml:16: services.s.compatibility.3.platforms: expected at least one platform (or no platforms key, for every platform)",
                "p.yaml:17: services.s.compatibility.4.platform: unknown key \"platform\"; expected one of: clients, platforms, version",
                "p.yaml:18: services.s.minimumClientVersion: expected a version such as 1.0.0, found one",
                "p.yaml:19: services.s.missingClientVersion: expected one of default, reject, found fail",
                "p.yaml:20: clients.versionHeader: expected a header field name such as X-Client-Version, found \"X Version\"",
            ], "\(result.errors)")
    }
}

/// App versions as clients send them.
@Suite("Client versions")
struct ClientVersionTests {
    @Test("what apps send parses to SemVer; anything else is refused")
    func parsing() {
        let accepted: [(String, String)] = [
            ("2.4.1", "2.4.1"), ("2.4", "2.4.0"), ("3", "3.0.0"), ("2.4.1-beta.2", "2.4.1-beta.2"), ("2.4.1+build.5", "2.4.1"),
            ("0.0.0", "0.0.0"), ("10.20.30-rc.1+exp", "10.20.30-rc.1"), ("1.0.0-x-y-z", "1.0.0-x-y-z"),
        ]
        for (text, normal) in accepted {
            #expect(ClientVersion.parse(text).map(ClientVersion.describe) == normal, "\(text)")
        }
        let refused = [
            "", "v2.4.1", "+2", "2.", ".2", "2..4", "2.4.1.0", "2.4.1-", "2.4.1+", "2.4.1-a..b", "2.4.1-ä", "2.4.1 beta", "-1.0.0",
            "1.-1.0", "2.4.x", "1234567890.0.0", String(repeating: "1.", count: 40) + "1",
        ]
        for text in refused {
            #expect(ClientVersion.parse(text) == nil, "\(text)")
        }
    }

    @Test("random text never traps, and whatever parses prints back to itself")
    func randomText() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789..--++abvZ \u{0}é")
        for _ in 0..<20_000 {
            let text = String((0..<Int.random(in: 0...14, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            guard let version = ClientVersion.parse(text) else { continue }
            let printed = ClientVersion.describe(version)
            #expect(ClientVersion.parse(printed) == version, "\(text) → \(printed)")
        }
    }
}
