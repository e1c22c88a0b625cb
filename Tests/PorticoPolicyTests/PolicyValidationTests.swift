import Foundation
import Testing

@testable import PorticoPolicy

@Suite("Policy validation")
struct PolicyValidationTests {
    static let listener = """
        listeners:
          - { name: public, address: 127.0.0.1, port: 8080 }

        """
    static let backends = """
        backends:
          quotes: { url: "http://127.0.0.1:18081", timeout: 5s }

        """

    static func load(_ files: [(String, String)]) -> Result<PolicySnapshot, PolicyError> {
        Result { () throws(PolicyError) in try PolicyLoader().load(sources: files.map { (file: $0.0, text: $0.1) }) }
    }

    static func diagnostics(_ files: [(String, String)]) -> [String] {
        switch load(files) {
        case .success: return []
        case .failure(let error): return error.diagnostics.map(\.description)
        }
    }

    struct BrokenCase: CustomTestStringConvertible, Sendable {
        let name: String
        let yaml: String
        /// Each must appear in one diagnostic line.
        let expected: [String]
        var testDescription: String { name }
    }

    static let brokenCases: [BrokenCase] = [
        BrokenCase(
            name: "unknown top-level key", yaml: listener + "servics: {}\n",
            expected: [
                "p.yaml:3: servics: unknown key \"servics\"; expected one of: listeners, limits, upstream, accessLog, backends, services, signatures, apiKeys, keys, tiers"
            ]),
        BrokenCase(
            name: "unknown key in a backend", yaml: listener + "backends:\n  quotes: { url: \"http://127.0.0.1:1\", tiemout: 5s }\n",
            expected: [
                "p.yaml:4: backends.quotes.tiemout: unknown key \"tiemout\"; expected one of: url, targets, connectTimeout, timeout, rateLimit, maxConcurrent, maxConcurrentPerTarget, client, balance, hashOn, healthCheck, outlierDetection, retries"
            ]),
        BrokenCase(
            name: "port of the wrong type", yaml: "listeners:\n  - { name: a, port: eighty }\n",
            expected: ["p.yaml:2: listeners.0.port: expected an integer, found eighty"]),
        BrokenCase(
            name: "port out of range", yaml: "listeners:\n  - { name: a, port: 70000 }\n",
            expected: ["listeners.0.port: expected an integer in 0...65535, found 70000"]),
        BrokenCase(
            name: "missing listener name", yaml: "listeners:\n  - { port: 80 }\n",
            expected: ["listeners.0: missing required key \"name\""]),
        BrokenCase(
            name: "no listeners", yaml: backends,
            expected: ["listeners: missing: at least one listener is required"]),
        BrokenCase(
            name: "bad duration", yaml: listener + "limits: { headTimeout: soon }\n",
            expected: ["limits.headTimeout: expected a positive duration such as 500ms, 10s or 5m, found soon"]),
        BrokenCase(
            name: "head limit too small to hold a request", yaml: listener + "limits: { maxHeadBytes: 100 }\n",
            expected: ["limits.maxHeadBytes: expected at least 1024 bytes (a request line and a few fields), found 100"]),
        BrokenCase(
            name: "bad size", yaml: listener + "limits: { maxBodyBytes: -5 }\n",
            expected: ["limits.maxBodyBytes: expected a positive size such as 16384, 16KiB or 1MiB, found -5"]),
        BrokenCase(
            name: "bad backend URL scheme", yaml: listener + "backends:\n  quotes: { url: \"ftp://127.0.0.1/x\" }\n",
            expected: [
                "backends.quotes.url: expected an absolute http:// or https:// URL with a host and no query, fragment or credentials, found \"ftp://127.0.0.1/x\""
            ]),
        BrokenCase(
            name: "backend URL with a query", yaml: listener + "backends:\n  quotes: { url: \"http://h/x?y=1\" }\n",
            expected: ["backends.quotes.url: expected an absolute http:// or https:// URL"]),
        BrokenCase(
            name: "backend URL that is not a URL", yaml: listener + "backends:\n  quotes: { url: \"not a url\" }\n",
            expected: ["backends.quotes.url: expected an absolute http:// or https:// URL"]),
        BrokenCase(
            name: "dangling backend reference",
            yaml: listener + backends + "services:\n  s:\n    path: /s\n    versions:\n      1: { proxy: { backend: quote } }\n",
            expected: ["p.yaml:9: services.s.versions.1.proxy.backend: unknown backend \"quote\"; expected one of: quotes"]),
        BrokenCase(
            name: "duplicate paths",
            yaml: listener + backends
                + "services:\n  a:\n    path: /api/x\n    versions: { 1: { proxy: { backend: quotes } } }\n  b:\n    path: /api/x\n    versions: { 1: { proxy: { backend: quotes } } }\n",
            expected: ["p.yaml:10: services.b.path: path \"/api/x\" is already routed to service \"a\""]),
        BrokenCase(
            name: "duplicate paths differing only in the version placeholder's position are distinct",
            yaml: listener + backends
                + "services:\n  a:\n    path: /api/{version}/x\n    versions: { 1: { proxy: { backend: quotes } } }\n  b:\n    path: /api/x/{version}\n    versions: { 1: { proxy: { backend: quotes } } }\n",
            expected: []),
        BrokenCase(
            name: "path without leading slash",
            yaml: listener + backends + "services:\n  a:\n    path: api\n    versions: { 1: { proxy: { backend: quotes } } }\n",
            expected: [
                "services.a.path: expected a path such as /api/quotes or /api/{version}/quotes (starting with '/', no trailing '/', no query), found \"api\""
            ]),
        BrokenCase(
            name: "two version placeholders",
            yaml: listener + backends
                + "services:\n  a:\n    path: /{version}/{version}\n    versions: { 1: { proxy: { backend: quotes } } }\n",
            expected: ["services.a.path: expected a path such as /api/quotes or /api/{version}/quotes: segments must be non-empty"]),
        BrokenCase(
            name: "version that is not a number",
            yaml: listener + backends + "services:\n  a:\n    path: /a\n    versions: { one: { proxy: { backend: quotes } } }\n",
            expected: ["services.a.versions.one: version \"one\" must be a positive integer such as 1 or 2"]),
        BrokenCase(
            name: "version without a handler",
            yaml: listener + backends + "services:\n  a:\n    path: /a\n    versions: { 1: {} }\n",
            expected: ["services.a.versions.1: expected a handler: proxy"]),
        BrokenCase(
            name: "default naming a version that does not exist",
            yaml: listener + backends
                + "services:\n  a:\n    path: /a\n    default: 3\n    versions: { 1: { proxy: { backend: quotes } } }\n",
            expected: ["services.a.default: expected \"latest\" or one of this service's versions (1), found 3"]),
        BrokenCase(
            name: "a list where a mapping belongs", yaml: listener + "backends:\n  - quotes\n",
            expected: ["p.yaml:4: backends: expected a mapping, found a list"]),
        BrokenCase(
            name: "invalid YAML", yaml: "listeners: [\n",
            expected: ["p.yaml:2: not valid YAML"]),
        BrokenCase(
            name: "duplicate key in one mapping",
            yaml: listener + "backends:\n  quotes: { url: \"http://a\" }\n  quotes: { url: \"http://b\" }\n",
            expected: ["p.yaml:4: not valid YAML: key \"quotes\" appears more than once in one mapping"]),
    ]

    @Test("a broken policy is refused with a message naming file, line and key path", arguments: brokenCases)
    func brokenPolicy(_ broken: BrokenCase) {
        let found = Self.diagnostics([("p.yaml", broken.yaml)])
        if broken.expected.isEmpty {
            #expect(found.isEmpty, "unexpected: \(found)")
        }
        for expected in broken.expected {
            #expect(found.contains { $0.contains(expected) }, "expected \(expected) in \(found)")
        }
    }

    @Test("every mistake is reported in one pass, across files")
    func allAtOnce() {
        let found = Self.diagnostics([
            ("a.yaml", "listeners:\n  - { name: a, port: x }\nlimits: { idleTimeout: never }\n"),
            (
                "b.yaml",
                "backends:\n  b1: { url: \"gopher://x\" }\nservices:\n  s: { path: /s, versions: { 1: { proxy: { backend: nope } } } }\n"
            ),
        ])
        #expect(found.count == 4, "\(found)")
        // Reported in file and line order.
        let prefixes = [
            "a.yaml:2: listeners.0.port", "a.yaml:3: limits.idleTimeout", "b.yaml:2: backends.b1.url",
            "b.yaml:4: services.s.versions.1.proxy.backend",
        ]
        for (line, prefix) in zip(found, prefixes) { #expect(line.hasPrefix(prefix), "\(line)") }
    }

    @Test("a section defined in two files, or a name defined twice, is an error")
    func duplicatesAcrossFiles() {
        let found = Self.diagnostics([
            ("a.yaml", Self.listener + "limits: {}\n" + Self.backends),
            ("b.yaml", "limits: {}\n" + Self.backends),
        ])
        #expect(found.contains { $0.contains("b.yaml:1: limits: defined again; first defined in a.yaml") })
        #expect(found.contains { $0.contains("b.yaml:3: backends.quotes: backend \"quotes\" is already defined in a.yaml") })
    }

    @Test("a valid policy compiles with its defaults")
    func validPolicy() throws {
        let snapshot = try PolicyLoader().load(sources: [
            (
                file: "p.yaml",
                text: Self.listener + Self.backends + """
                    limits: { maxBodyBytes: 2MiB, headTimeout: 1500ms, sendTimeout: 20s }
                    services:
                      quotes:
                        path: /api/{version}/quotes
                        versions:
                          1: { proxy: { backend: quotes, rewrite: /v1/ } }
                          2: { proxy: { backend: quotes } }
                    """
            )
        ])
        #expect(snapshot.limits.maxBodyBytes == 2 * 1024 * 1024)
        #expect(snapshot.limits.headTimeout == .milliseconds(1500))
        #expect(snapshot.limits.idleTimeout == .seconds(60))
        #expect(snapshot.limits.sendTimeout == .seconds(20))
        #expect(LimitsPolicy().sendTimeout == .seconds(60))
        let backend = try #require(snapshot.backend(named: "quotes"))
        #expect(backend.url.port == 18081)
        #expect(backend.timeout == .seconds(5))
        #expect(backend.connectTimeout == .seconds(2))
        let match = try #require(snapshot.routes.match(path: "/api/2/quotes/AAPL", host: nil))
        #expect(match.service.name == "quotes")
        #expect(match.path.version == "2")
        #expect(match.path.remainder == "/AAPL")
        #expect(match.service.defaultVersion == 2)
        if case .proxy(let proxy) = match.service.policy.versions[1]!.handler { #expect(proxy.rewrite == "/v1") }
    }

    @Test("the shipped default policy is valid")
    func shippedPolicy() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../policies").standardized
            .path
        let snapshot = try PolicyLoader().load(directory: directory)
        #expect(!snapshot.listeners.isEmpty)
        #expect(snapshot.routes.match(path: "/api/1/stockquote/AAPL", host: nil) != nil)
    }

    @Test("the most specific route wins and host-bound routes only match their host")
    func routeOrder() throws {
        let snapshot = try PolicyLoader().load(sources: [
            (
                file: "p.yaml",
                text: Self.listener + Self.backends + """
                    services:
                      root: { path: /, versions: { 1: { proxy: { backend: quotes } } } }
                      api: { path: /api, versions: { 1: { proxy: { backend: quotes } } } }
                      deep: { path: /api/deep, versions: { 1: { proxy: { backend: quotes } } } }
                      hosted: { path: /api, host: Partner.Example, versions: { 1: { proxy: { backend: quotes } } } }
                    """
            )
        ])
        #expect(snapshot.routes.match(path: "/api/deep/x", host: nil)?.service.name == "deep")
        #expect(snapshot.routes.match(path: "/api/deeper", host: nil)?.service.name == "api")
        #expect(snapshot.routes.match(path: "/api/x", host: "partner.example")?.service.name == "hosted")
        #expect(snapshot.routes.match(path: "/api/x", host: "other.example")?.service.name == "api")
        #expect(snapshot.routes.match(path: "/elsewhere", host: nil)?.service.name == "root")
    }

    @Test("loading a directory reports a missing directory and files that are not YAML are ignored")
    func directoryLoading() throws {
        let missing = Result { () throws(PolicyError) in try PolicyLoader().load(directory: "/nonexistent/policies") }
        guard case .failure(let error) = missing else { Issue.record("expected failure"); return }
        #expect(error.diagnostics.first?.description == "/nonexistent/policies: not a readable directory")

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-policy-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try (Self.listener).write(to: directory.appendingPathComponent("a.yaml"), atomically: true, encoding: .utf8)
        try "not: [yaml".write(to: directory.appendingPathComponent("README.md"), atomically: true, encoding: .utf8)
        try "backends: { x: { url: \"http://h:1\" } }".write(
            to: directory.appendingPathComponent("b.yml"), atomically: true, encoding: .utf8)
        let snapshot = try PolicyLoader().load(directory: directory.path)
        #expect(snapshot.policy.backends["x"] != nil)
    }
}
