import Foundation
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// The active version map end to end: a real gateway, a real backend (echo, which shows the
/// path each version's rewrite sent it), and requests that differ only in their app version,
/// platform and named version.
@Suite("Compatibility buckets")
struct BucketResolutionTests {
    /// The issue's table, with the bucket for every platform bounded above at 5.0.0 so that "newer
    /// than every bucket" exists, and a default (4) that no bucket maps to, so it is recognisable.
    static func policy(_ ports: [Int]) -> String {
        """
        backends:
          echo: { url: "http://127.0.0.1:\(ports[0])" }
        services:
          quotes:
            path: /api/{version}/quotes
            versions:
              1: { proxy: { backend: echo, rewrite: /v1 } }
              2: { proxy: { backend: echo, rewrite: /v2 } }
              3: { proxy: { backend: echo, rewrite: /v3 } }
              4: { proxy: { backend: echo, rewrite: /v4 } }
            compatibility:
              - { clients: "<2.0.0", version: 1 }
              - { clients: ">=2.0.0 <3.1.0", version: 2 }
              - { clients: ">=3.1.0 <5.0.0", version: 3 }
              - { clients: ">=2.5.0", platforms: [ipad], version: 3 }
            minimumClientVersion: 1.0.0
          strict:
            path: /strict
            versions:
              1: { proxy: { backend: echo, rewrite: /s1 } }
              2: { proxy: { backend: echo, rewrite: /s2 } }
            compatibility:
              - { clients: "<2.0.0", version: 1 }
              - { clients: ">=2.0.0", version: 2 }
            missingClientVersion: reject
          plain:
            path: /plain
            versions:
              1: { proxy: { backend: echo, rewrite: /p1 } }
          unrewritten:
            path: /api/{version}/things
            versions:
              1: { proxy: { backend: echo } }
              2: { proxy: { backend: echo } }
            compatibility:
              - { clients: "<2.0.0", version: 1 }
        """
    }

    /// One request: the app's version and platform (nil: no such field), and what it must get:
    /// the API version served, or a problem's status and type.
    struct Case: CustomStringConvertible {
        var target = "/api/quotes/AAPL"
        let version: String?
        var platform: String? = nil
        let expected: Expected

        enum Expected {
            case served(Int)
            case problem(Int, String)
        }

        var description: String { "\(target) version=\(version ?? "-") platform=\(platform ?? "-")" }
    }

    static let cases: [Case] = [
        // Inside each bucket, at and near its bounds.
        Case(version: "1.0.0", expected: .served(1)),
        Case(version: "1.9.9", expected: .served(1)),
        Case(version: "1.9", expected: .served(1)),
        Case(version: "2.0.0", expected: .served(2)),
        Case(version: "2.4.1", expected: .served(2)),
        Case(version: "3.0.99", expected: .served(2)),
        Case(version: "3.1.0", expected: .served(3)),
        Case(version: "4.99.99", expected: .served(3)),
        // Two-part and one-part versions mean .0.
        Case(version: "2", expected: .served(2)),
        Case(version: "2.4", expected: .served(2)),
        Case(version: "3.1", expected: .served(3)),
        // Pre-releases order before their release (SemVer): 2.0.0's betas are still below 2.0.0.
        Case(version: "2.0.0-beta.1", expected: .served(1)),
        Case(version: "2.4.1-beta.2", expected: .served(2)),
        Case(version: "3.1.0-rc.1", expected: .served(2)),
        Case(version: "3.1.0-0", expected: .served(2)),
        // Build metadata is ignored.
        Case(version: "2.4.1+build.77", expected: .served(2)),
        Case(version: "3.1.0-rc.1+exp.sha.5114f85", expected: .served(2)),
        // Above every bucket: the default.
        Case(version: "5.0.0", expected: .served(4)),
        Case(version: "12.3", expected: .served(4)),
        Case(version: "5.0.0-alpha", expected: .served(3)),
        // Platforms: ipad's own bucket takes precedence, from 2.5.0 and without an upper bound.
        Case(version: "2.5.0", platform: "ipad", expected: .served(3)),
        Case(version: "2.5.0", platform: "iPad", expected: .served(3)),
        Case(version: "2.4.9", platform: "ipad", expected: .served(2)),
        Case(version: "1.5.0", platform: "ipad", expected: .served(1)),
        Case(version: "9.0.0", platform: "ipad", expected: .served(3)),
        Case(version: "2.5.0", platform: "iphone", expected: .served(2)),
        Case(version: "9.0.0", platform: "android", expected: .served(4)),
        Case(version: "2.5.0", platform: "", expected: .served(2)),
        // Below the minimum: 426, whichever platform.
        Case(version: "0.9.9", expected: .problem(426, "upgrade-required")),
        Case(version: "0.1", expected: .problem(426, "upgrade-required")),
        Case(version: "1.0.0-alpha", expected: .problem(426, "upgrade-required")),
        Case(version: "0.9.0", platform: "ipad", expected: .problem(426, "upgrade-required")),
        // No version: the default (this service), or 400 (the strict one).
        Case(version: nil, expected: .served(4)),
        Case(version: nil, platform: "ipad", expected: .served(4)),
        Case(target: "/strict/x", version: nil, expected: .problem(400, "client-version-required")),
        Case(target: "/strict/x", version: "1.2.0", expected: .served(1)),
        Case(target: "/strict/x", version: "2.0.0", expected: .served(2)),
        Case(target: "/strict/x", version: "40.0.0", expected: .served(2)),
        // Garbage: 400 naming the header.
        Case(version: "garbage", expected: .problem(400, "invalid-client-version")),
        Case(version: "", expected: .problem(400, "invalid-client-version")),
        Case(version: "2.4.1.7", expected: .problem(400, "invalid-client-version")),
        Case(version: "v2.4.1", expected: .problem(400, "invalid-client-version")),
        Case(version: "+2.4", expected: .problem(400, "invalid-client-version")),
        Case(version: "2..4", expected: .problem(400, "invalid-client-version")),
        Case(version: "2.4.1-", expected: .problem(400, "invalid-client-version")),
        Case(version: "2.4.1-beta..2", expected: .problem(400, "invalid-client-version")),
        Case(version: "2.4.1-beta_2", expected: .problem(400, "invalid-client-version")),
        Case(version: "99999999999.0.0", expected: .problem(400, "invalid-client-version")),
        Case(version: "2.4.1 ", expected: .served(2)),  // optional whitespace around a field value is not part of it
        Case(version: String(repeating: "1", count: 65), expected: .problem(400, "invalid-client-version")),
        Case(target: "/strict/x", version: "two", expected: .problem(400, "invalid-client-version")),
        // An explicit version wins over the map, in the path and in the query.
        Case(target: "/api/1/quotes/AAPL", version: "3.5.0", expected: .served(1)),
        Case(target: "/api/4/quotes/AAPL", version: "1.2.0", expected: .served(4)),
        Case(target: "/api/quotes/AAPL?apiVersion=2", version: "4.0.0", expected: .served(2)),
        Case(target: "/api/v3/quotes/AAPL", version: nil, expected: .served(3)),
        Case(target: "/strict/x?apiVersion=2", version: nil, expected: .served(2)),
        // … but an unknown one is 404, and the minimum still holds.
        Case(target: "/api/9/quotes/AAPL", version: "3.5.0", expected: .problem(404, "unknown-api-version")),
        Case(target: "/api/quotes/AAPL?apiVersion=0", version: nil, expected: .problem(404, "unknown-api-version")),
        Case(target: "/api/2/quotes/AAPL", version: "0.5.0", expected: .problem(426, "upgrade-required")),
        Case(target: "/api/2/quotes/AAPL", version: "junk", expected: .problem(400, "invalid-client-version")),
        // A service without buckets or minimum ignores the fields entirely.
        Case(target: "/plain/x", version: "junk", expected: .served(1)),
        Case(target: "/plain/x", version: "0.0.1", expected: .served(1)),
    ]

    @Test("dozens of app versions and platforms resolve to the API version of their bucket")
    func resolutionTable() async throws {
        #expect(Self.cases.count >= 50)
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            var expectedForwards = 0
            for item in Self.cases {
                var headers: [(String, String)] = []
                if let version = item.version { headers.append(("X-Client-Version", version)) }
                if let platform = item.platform { headers.append(("X-Client-Platform", platform)) }
                let response = try client.request("GET", item.target, headers: headers)
                switch item.expected {
                case .served(let version):
                    expectedForwards += 1
                    #expect(response.status == 200, "\(item): \(response.bodyText)")
                    #expect(response.header("X-API-Version") == String(version), "\(item)")
                    // The backend saw the path of the version's rewrite.
                    let path = response.json?["path"] as? String ?? ""
                    let prefix = item.target.hasPrefix("/strict") ? "/s" : item.target.hasPrefix("/plain") ? "/p" : "/v"
                    #expect(path.hasPrefix("\(prefix)\(version)"), "\(item): backend saw \(path)")
                case .problem(let status, let type):
                    #expect(response.status == status, "\(item): \(response.bodyText)")
                    #expect(response.header("Content-Type") == "application/problem+json", "\(item)")
                    #expect(response.json?["type"] as? String == "urn:portico:problem:\(type)", "\(item)")
                    #expect(response.header("X-API-Version") == nil, "\(item)")
                }
            }
            #expect(servers[0].requestsReceived == expectedForwards)
        }
    }

    @Test("the problems say what to do: 426 for the user, 400 naming the header, 404 listing the versions")
    func problemBodies() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            let old = try client.request("GET", "/api/quotes/AAPL", headers: [("X-Client-Version", "0.9")])
            #expect(old.status == 426)
            #expect(old.json?["title"] as? String == "Update required")
            #expect(
                old.json?["detail"] as? String
                    == "This version of the app is no longer supported. Please update the app to version 1.0.0 or later.")
            #expect(old.json?["minimumClientVersion"] as? String == "1.0.0")
            #expect(old.header("Upgrade") == nil)

            let garbage = try client.request("GET", "/api/quotes/AAPL", headers: [("X-Client-Version", "latest!")])
            #expect(garbage.json?["detail"] as? String == "X-Client-Version must be an app version such as 2.4.1, 2.4 or 2.4.1-beta.2.")
            #expect(garbage.json?["header"] as? String == "X-Client-Version")
            #expect(!garbage.bodyText.contains("latest!"))

            let missing = try client.request("GET", "/strict/x")
            #expect(missing.json?["header"] as? String == "X-Client-Version")

            let unknown = try client.request("GET", "/api/7/quotes/AAPL")
            #expect(unknown.status == 404)
            #expect(unknown.json?["detail"] as? String == "Service quotes has no version 7; available: 1, 2, 3, 4.")
        }
    }

    @Test("only canonical versions are versions: 01, +1, 1.0, V1 name none, whatever the backend would make of them")
    func canonicalVersions() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            for version in ["01", "+1", "-1", "1.0", "V1", "v01", "0x1", "1%20"] {
                let path = try client.request("GET", "/api/\(version)/things/x")
                #expect(path.status == 404, "\(version)")
                #expect(path.json?["type"] as? String == "urn:portico:problem:unknown-api-version", "\(version)")
                let query = try client.request("GET", "/api/things/x?apiVersion=\(version)")
                #expect(query.status == 404, "\(version)")
            }
            #expect(servers[0].requestsReceived == 0)
            // The canonical forms are served, as named.
            #expect(try client.request("GET", "/api/2/things/x").header("X-API-Version") == "2")
            #expect(try client.request("GET", "/api/v2/things/x").header("X-API-Version") == "2")
            #expect(try client.request("GET", "/api/things/x?apiVersion=2").header("X-API-Version") == "2")
        }
    }

    @Test("a request that names two different versions (path and query, or the query twice) gets 400; the same one twice is served")
    func conflictingVersions() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            for target in [
                "/api/1/things/x?apiVersion=2", "/api/v1/things/x?apiVersion=2", "/api/things/x?apiVersion=1&apiVersion=2",
                "/api/1/things/x?apiVersion=1&apiVersion=2", "/api/1/things/x?apiVersion=01",
            ] {
                let response = try client.request("GET", target)
                #expect(response.status == 400, "\(target)")
                #expect(response.json?["type"] as? String == "urn:portico:problem:conflicting-api-versions", "\(target)")
            }
            #expect(servers[0].requestsReceived == 0)
            let same = try client.request("GET", "/api/1/things/x?apiVersion=1")
            #expect(same.status == 200)
            #expect(same.header("X-API-Version") == "1")
            #expect(try client.request("GET", "/api/v2/things/x?apiVersion=2&apiVersion=v2").header("X-API-Version") == "2")
        }
    }

    @Test("answers carry X-API-Version, and Vary on the fields that chose it")
    func varyAndVersionFields() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            let mapped = try client.request("GET", "/api/quotes/AAPL", headers: [("X-Client-Version", "2.1.0")])
            #expect(mapped.header("X-API-Version") == "2")
            // The quotes service has a platform bucket, so both fields decide.
            #expect(mapped.header("Vary") == "X-Client-Version, X-Client-Platform")
            let refused = try client.request("GET", "/api/quotes/AAPL", headers: [("X-Client-Version", "0.1.0")])
            #expect(refused.header("Vary") == "X-Client-Version, X-Client-Platform")
            // The strict service's buckets are for every platform: only the version decides.
            #expect(try client.request("GET", "/strict/x", headers: [("X-Client-Version", "2.0")]).header("Vary") == "X-Client-Version")
            // A service that does not read the fields does not vary on them.
            let plain = try client.request("GET", "/plain/x", headers: [("X-Client-Version", "2.0")])
            #expect(plain.header("X-API-Version") == "1")
            #expect(plain.header("Vary") == nil)
        }
    }

    @Test("without a rewrite, a versionless request reaches the backend with the chosen version in its path")
    func versionlessForwarding() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            let mapped = try client.request("GET", "/api/things/x/y?z=1", headers: [("X-Client-Version", "1.5")])
            #expect(mapped.json?["path"] as? String == "/api/1/things/x/y")
            #expect(mapped.json?["query"] as? String == "z=1")
            let defaulted = try client.request("GET", "/api/things")
            #expect(defaulted.json?["path"] as? String == "/api/2/things")
            // A request that names its version is forwarded as it came.
            #expect(try client.request("GET", "/api/v1/things/x").json?["path"] as? String == "/api/v1/things/x")
        }
    }

    @Test("the field names are the policy's clients section's")
    func configurableHeaderNames() async throws {
        let policy: ([Int]) -> String = { ports in
            """
            clients: { versionHeader: X-App-Version, platformHeader: X-App-Platform }
            \(Self.policy(ports))
            """
        }
        try await withGateway(policy: policy) { gateway, _ in
            let client = try gateway.connect()
            let named = try client.request("GET", "/api/quotes/AAPL", headers: [("x-app-version", "2.6.0"), ("X-App-Platform", "ipad")])
            #expect(named.header("X-API-Version") == "3")
            #expect(named.header("Vary") == "X-App-Version, X-App-Platform")
            // The default names mean nothing now: no version, so the default.
            #expect(try client.request("GET", "/api/quotes/AAPL", headers: [("X-Client-Version", "1.0.0")]).header("X-API-Version") == "4")
            let garbage = try client.request("GET", "/api/quotes/AAPL", headers: [("X-App-Version", "x")])
            #expect(garbage.json?["detail"] as? String == "X-App-Version must be an app version such as 2.4.1, 2.4 or 2.4.1-beta.2.")
        }
    }
}
