import Foundation
import NIOHTTP1
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

/// Address lists (a service's, a key's, the admin listener's) and `trustedProxies`, through the
/// real gateway, with clients on loopback addresses other than 127.0.0.1 (all of 127/8 is this
/// machine's).
@Suite("IP allow and deny lists, and the proxies whose X-Forwarded-For is believed")
struct AddressListTests {
    static let secret = "address-list-secret-0123456789abcdefghijklmnopqrstuvwxyz"

    static func policy(_ ports: [Int], trusted: String = "[]") -> String {
        """
        trustedProxies: \(trusted)
        apiKeys: { header: X-API-Key }
        backends:
          echo: { url: "http://127.0.0.1:\(ports[0])" }
        services:
          inside: { path: /inside, allowFrom: [127.0.0.2/32, "::1"], versions: { 1: { proxy: { backend: echo } } } }
          open: { path: /open, denyFrom: [127.0.0.3, 203.0.113.0/24], versions: { 1: { proxy: { backend: echo } } } }
          keyed: { path: /keyed, auth: apiKey, versions: { 1: { proxy: { backend: echo } } } }
        tiers:
          roomy: { rate: 1000/s, burst: 1000 }
        keys:
          pinned: { secret: "\(secret)", demo: true, services: ["*"], tier: roomy, allowFrom: [127.0.0.4/32] }
        """
    }

    static func from(_ address: String, _ gateway: TestGateway) throws -> RawHTTPClient {
        try gateway.connect(socketOptions: .init(sourceAddress: address))
    }

    @Test("a service's allowFrom admits only its addresses and denyFrom refuses its own, before authentication, with 403")
    func serviceLists() async throws {
        try await withGateway(policy: { Self.policy($0) }) { gateway, _ in
            let refused = try Self.from("127.0.0.1", gateway).request("GET", "/inside/a")
            #expect(refused.status == 403)
            #expect(refused.json?["type"] as? String == "urn:portico:problem:address-refused")
            #expect(refused.header("Content-Type") == "application/problem+json")
            #expect(try Self.from("127.0.0.2", gateway).request("GET", "/inside/a").status == 200)
            #expect(try Self.from("127.0.0.3", gateway).request("GET", "/open/a").status == 403)
            #expect(try Self.from("127.0.0.2", gateway).request("GET", "/open/a").status == 200)
        }
    }

    @Test("a key's allowFrom: the right secret from another address is refused, once the key is known")
    func keyLists() async throws {
        try await withGateway(policy: { Self.policy($0) }) { gateway, _ in
            let key = [("X-API-Key", "pinned.\(Self.secret)")]
            let elsewhere = try Self.from("127.0.0.1", gateway).request("GET", "/keyed/a", headers: key)
            #expect(elsewhere.status == 403)
            #expect((elsewhere.json?["detail"] as? String)?.contains("API key") == true)
            #expect(try Self.from("127.0.0.4", gateway).request("GET", "/keyed/a", headers: key).status == 200)
            // A wrong secret is still an authentication failure, wherever it comes from.
            #expect(try Self.from("127.0.0.1", gateway).request("GET", "/keyed/a", headers: [("X-API-Key", "pinned.wrong")]).status == 401)
        }
    }

    @Test("X-Forwarded-For is believed only from trustedProxies, read from the right past trusted hops; the lists and the backend use it")
    func trustedProxies() async throws {
        try await withGateway(policy: { Self.policy($0, trusted: "[127.0.0.1/32, 10.0.0.0/8]") }) { gateway, _ in
            // From a trusted proxy: the last untrusted hop is the client.
            let proxied = try Self.from("127.0.0.1", gateway).request(
                "GET", "/open/a", headers: [("X-Forwarded-For", "198.51.100.7, 203.0.113.9, 10.1.2.3")])
            #expect(proxied.status == 403)
            let allowed = try Self.from("127.0.0.1", gateway).request("GET", "/open/a", headers: [("X-Forwarded-For", "198.51.100.7")])
            #expect(allowed.status == 200)
            #expect((allowed.json?["headers"] as? [String: String])?["x-forwarded-for"] == "198.51.100.7")
            // From any other peer the field is the client's own claim, and ignored.
            let claimed = try Self.from("127.0.0.2", gateway).request("GET", "/open/a", headers: [("X-Forwarded-For", "203.0.113.9")])
            #expect(claimed.status == 200)
            #expect((claimed.json?["headers"] as? [String: String])?["x-forwarded-for"] == "127.0.0.2")
            // An entry that is not an address stops the walk: the peer stands.
            let garbled = try Self.from("127.0.0.1", gateway).request(
                "GET", "/inside/a", headers: [("X-Forwarded-For", "127.0.0.2, nonsense")])
            #expect(garbled.status == 403)
        }
    }

    @Test("the resolved address: its rule, its rate-limit subject, an IPv4-mapped IPv6 peer")
    func rule() throws {
        var client = ClientConnection()
        client.address = "127.0.0.1"
        client.peerBytes = AddressRange.bytes(of: "::ffff:127.0.0.1")
        client.addressBytes = client.peerBytes
        let trusted = [try #require(AddressRange("127.0.0.0/8"))]
        let resolved = ClientAddressRule.resolve(client, headers: HTTPHeaders([("X-Forwarded-For", "2001:db8::7")]), trusted: trusted)
        #expect(resolved.address == "2001:db8::7")
        #expect(resolved.addressSubject == "2001:db8:0:0::/64")
        let untrusted = ClientAddressRule.resolve(client, headers: HTTPHeaders([("X-Forwarded-For", "2001:db8::7")]), trusted: [])
        #expect(untrusted.address == "127.0.0.1")
        let range = try #require(AddressRange("10.1.0.0/16"))
        #expect(range.contains(AddressRange.bytes(of: "10.1.255.255")!))
        #expect(!range.contains(AddressRange.bytes(of: "10.2.0.0")!))
        #expect(range.contains(AddressRange.bytes(of: "::ffff:10.1.0.1")!))
        #expect(try #require(AddressRange("::/0")).contains(AddressRange.bytes(of: "2001:db8::1")!))
        #expect(!(try #require(AddressRange("::/0"))).contains(AddressRange.bytes(of: "10.0.0.1")!))
        #expect(range.description == "10.1.0.0/16")
        for invalid in ["10.0.0.0/33", "10.0.0.0/", "host.example", "10.0.0.0/+8", "::/129", "1.2.3"] {
            #expect(AddressRange(invalid) == nil, "\(invalid)")
        }
    }

    @Test("the admin listener's allowFrom refuses other peers with 403, before its token")
    func admin() async throws {
        let snapshot = try TestGateway.snapshot(policy: "admin: { port: 0, allowFrom: [127.0.0.2] }")
        let gateway = Gateway(snapshot: snapshot)
        let api = AdminAPI(gateway: gateway, reloader: nil, boundAddress: "127.0.0.1")
        var other = AdminAPI.RequestOrigin.tool
        other.peer = AddressRange.bytes(of: "127.0.0.1")
        let refused = await api.respond(method: .GET, uri: "/healthz", authorization: nil, from: other)
        #expect(refused.status == .forbidden)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("address-refused"))
        var inside = AdminAPI.RequestOrigin.tool
        inside.peer = AddressRange.bytes(of: "127.0.0.2")
        #expect(await api.respond(method: .GET, uri: "/healthz", authorization: nil, from: inside).status == .ok)
    }
}
