import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// The gateway decides what a path means before a backend can: dot-segments in any encoding and
/// encoded slashes never reach a backend, and routes match the normal form.
@Suite("Encoded path traversal")
struct PathTraversalTests {
    static func policy(_ ports: [Int]) -> String {
        """
        backends:
          echo: { url: "http://127.0.0.1:\(ports[0])" }
        services:
          quotes:
            path: /api/{version}/stockquote
            versions:
              1: { proxy: { backend: echo, rewrite: /v1/quotes } }
          files:
            path: /files
            allowEncodedSlashes: true
            versions:
              1: { proxy: { backend: echo, rewrite: /store } }
        """
    }

    static let dotForms: [String] = PathNormalizerTests.dotForms
    static let slashForms: [String] = ["%2f", "%2F", "%5c", "%5C"]

    /// Every position after the service prefix: first, middle and last segment, and inside one.
    static func positions(of form: String) -> [String] {
        [
            "/api/1/stockquote/\(form)", "/api/1/stockquote/\(form)/admin", "/api/1/stockquote/a/\(form)/admin",
            "/api/1/stockquote/a/\(form)", "/api/1/stockquote/\(form)/\(form)/admin",
        ]
    }

    @Test("a dot-segment in any case and encoding, at any position, gets 400 and reaches no backend", arguments: dotForms)
    func dotSegments(form: String) async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            for target in Self.positions(of: form) {
                let response = try client.request("GET", target)
                #expect(response.status == 400, "\(target)")
                #expect(response.json?["type"] as? String == "urn:portico:problem:bad-request", "\(target)")
            }
            // The version segment is a position too.
            #expect(try client.request("GET", "/api/\(form)/stockquote/AAPL").status == 400)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    /// Sends each of `targets` on one connection to a gateway in front of the echo backend: each
    /// must get a 400 `bad-request` problem, and none may reach the backend.
    func expectRefused(_ targets: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            for target in targets {
                let response = try client.request("GET", target)
                #expect(response.status == 400, "\(target)", sourceLocation: sourceLocation)
                #expect(
                    response.json?["type"] as? String == "urn:portico:problem:bad-request", "\(target)", sourceLocation: sourceLocation)
            }
            #expect(servers[0].requestsReceived == 0, sourceLocation: sourceLocation)
        }
    }

    @Test(
        "a dot-segment before a path parameter ('..;', '%2e%2e;', '.;'), at any position, gets 400 and reaches no backend",
        arguments: PathNormalizerTests.parameterForms)
    func dotSegmentsBeforeParameters(form: String) async throws {
        try await expectRefused(Self.positions(of: form) + ["/api/\(form)/stockquote/AAPL"])
    }

    @Test("a '#' anywhere in the request target gets 400 and reaches no backend")
    func fragments() async throws {
        try await expectRefused(
            Self.positions(of: "a#b") + ["/api/1/stockquote#", "/api/1/stockquote/AAPL?x=1#frag", "/api/1/stockquote/AAPL?#"])
    }

    @Test("encoded bytes that are not UTF-8 (overlong '%C0%AE'), at any position, get 400", arguments: PathNormalizerTests.invalidUTF8)
    func invalidUTF8(form: String) async throws {
        try await expectRefused(Self.positions(of: form) + ["/api/\(form)/stockquote/AAPL"])
    }

    @Test("an encoded slash or backslash inside a segment gets 400 by default", arguments: slashForms)
    func encodedSlashes(form: String) async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            for target in Self.positions(of: form) + Self.positions(of: "..\(form)") + Self.positions(of: "a\(form)b") {
                let response = try client.request("GET", target)
                #expect(response.status == 400, "\(target)")
            }
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("a service that allows encoded slashes receives them, uppercased, with dot-segments still refused")
    func allowedEncodedSlashes() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            let response = try client.request("GET", "/files/dir%2fname%5cx")
            #expect(response.status == 200)
            #expect(response.json?["path"] as? String == "/store/dir%2Fname%5Cx")
            #expect(try client.request("GET", "/files/%2e%2e/%2e%2e/admin").status == 400)
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test("routes match and backends receive the normal form")
    func normalFormForwarded() async throws {
        try await withGateway(policy: Self.policy) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/api/1/%73tockquote/%41APL/%7euser/%c3%a9?q=%2e%2e")
            #expect(response.status == 200)
            #expect(response.json?["path"] as? String == "/v1/quotes/AAPL/~user/%C3%A9")
            // The query is forwarded as sent: it is not a path.
            #expect(response.json?["query"] as? String == "q=%2e%2e")
        }
    }

    @Test("broken percent-encoding, raw backslashes and encoded NULs get 400")
    func malformedPaths() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            for target in ["/api/1/stockquote/%zz", "/api/1/stockquote/a%2", "/api/1/stockquote/%00x", "/api/1/stockquote/a\\..\\b"] {
                let response = try client.request("GET", target)
                #expect(response.status == 400, "\(target)")
            }
            #expect(servers[0].requestsReceived == 0)
        }
    }
}
