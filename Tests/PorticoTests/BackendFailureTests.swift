import Foundation
import NIOCore
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@Suite("Backends that fail")
struct BackendFailureTests {
    static func policy(port: Int, timeout: String = "5s") -> String {
        """
        backends:
          inventory: { url: "http://127.0.0.1:\(port)", connectTimeout: 1s, timeout: \(timeout) }
        services:
          inventory:
            path: /inventory
            versions:
              1: { proxy: { backend: inventory } }
        """
    }

    @Test("a refusing backend answers 502 naming the backend, not its address")
    func refused() async throws {
        let port = try RefusingPort.make()
        try await withGateway(backends: [], policy: { _ in Self.policy(port: port) }) { gateway, _ in
            let client = try gateway.connect()
            let response = try client.request("GET", "/inventory/items")
            #expect(response.status == 502)
            #expect(response.header("content-type") == "application/problem+json")
            let problem = try #require(response.json)
            #expect(problem["type"] as? String == "urn:portico:problem:backend-unavailable")
            #expect(problem["backend"] as? String == "inventory")
            #expect(!response.bodyText.contains("127.0.0.1"))
            #expect(!response.bodyText.contains(String(port)))
            // The connection stays usable.
            #expect(try client.request("GET", "/inventory/items").status == 502)
        }
    }

    @Test("a backend that hangs past its timeout answers 504")
    func hangs() async throws {
        try await withGateway(backends: [{ _ in .hang }], policy: { Self.policy(port: $0[0], timeout: "300ms") }) { gateway, _ in
            let client = try gateway.connect(receiveTimeout: 30)
            let response = try await offThePool { try client.request("GET", "/inventory") }
            #expect(response.status == 504)
            #expect(response.json?["type"] as? String == "urn:portico:problem:backend-timeout")
            #expect(response.json?["backend"] as? String == "inventory")
        }
    }

    @Test("a backend that closes without answering gives 502")
    func closesWithoutAnswer() async throws {
        try await withGateway(backends: [{ _ in .close }], policy: { Self.policy(port: $0[0]) }) { gateway, _ in
            let response = try gateway.connect().request("POST", "/inventory", body: "{}")
            #expect(response.status == 502)
            #expect(response.json?["backend"] as? String == "inventory")
        }
    }
}
