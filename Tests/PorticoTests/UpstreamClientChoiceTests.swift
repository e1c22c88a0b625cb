import Foundation
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// The gateway with both upstream clients: NIO (the default for `http://`) and libcurl (`client: curl`).
@Suite("Choosing the upstream client per backend")
struct UpstreamClientChoiceTests {
    static func policy(_ ports: [Int]) -> String {
        """
        backends:
          viaNIO: { url: "http://127.0.0.1:\(ports[0])/base", timeout: 5s }
          viaCurl: { url: "http://127.0.0.1:\(ports[0])/base", timeout: 5s, client: curl }
        services:
          nio: { path: /nio, versions: { 1: { proxy: { backend: viaNIO, rewrite: /x } } } }
          curl: { path: /curl, versions: { 1: { proxy: { backend: viaCurl, rewrite: /x } } } }
        """
    }

    @Test("the NIO client and libcurl forward the same request identically, and both reuse their connections")
    func sameForwarding() async throws {
        try await withGateway(policy: Self.policy) { gateway, servers in
            let client = try gateway.connect()
            let requests: [(String, String, String?)] = [("GET", "/p?q=1", nil), ("POST", "/p", "body"), ("DELETE", "/p", nil)]
            let echoed = try await offThePool { () -> [[String: String]] in
                var echoed: [[String: String]] = []
                for (method, path, body) in requests {
                    for prefix in ["/nio", "/curl"] {
                        let response = try client.request(
                            method, prefix + path, headers: [("X-Custom", "v"), ("X-Request-Id", "req-1")], body: body)
                        let json = response.json ?? [:]
                        var seen = json["headers"] as? [String: String] ?? [:]
                        seen["(status)"] = String(response.status)
                        seen["(method)"] = json["method"] as? String
                        seen["(path)"] = json["path"] as? String
                        seen["(query)"] = json["query"] as? String
                        seen["(body)"] = json["body"] as? String
                        echoed.append(seen)
                    }
                }
                return echoed
            }
            for pair in stride(from: 0, to: echoed.count, by: 2) {
                #expect(echoed[pair] == echoed[pair + 1], "NIO: \(echoed[pair])\ncurl: \(echoed[pair + 1])")
                #expect(echoed[pair]["(status)"] == "200")
                #expect(echoed[pair]["(path)"] == "/base/x/p")
            }
            // One connection from each client (the test's requests come from one client connection,
            // so from one event loop).
            #expect(servers[0].connectionsAccepted == 2)
        }
    }
}
