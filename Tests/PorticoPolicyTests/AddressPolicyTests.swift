import Testing

@testable import PorticoPolicy

@Suite("Address lists and trustedProxies in the policy")
struct AddressPolicyTests: LoadsPolicyText {
    static let base = """
        listeners:
          - { name: public, port: 0 }
        backends:
          origin: { url: "http://127.0.0.1:9" }
        """

    @Test("trustedProxies, a service's, a key's and the admin listener's lists are read")
    func read() throws {
        let policy = try Self.load(
            Self.base + """

                trustedProxies: [10.0.0.0/8, "fd00::/8"]
                admin: { port: 0, allowFrom: [127.0.0.1] }
                services:
                  a: { path: /a, allowFrom: [192.0.2.0/24], denyFrom: [192.0.2.7], versions: { 1: { proxy: { backend: origin } } } }
                keys:
                  k: { secret: "0123456789abcdefghijklmnopqrstuvwxyz", demo: true, services: [a], denyFrom: ["::/0"] }
                """
        ).get().policy
        #expect(policy.trustedProxies.map(\.description) == ["10.0.0.0/8", "fd00::/8"])
        #expect(policy.admin?.addresses.allow?.map(\.description) == ["127.0.0.1/32"])
        #expect(policy.services["a"]?.addresses.allow?.map(\.description) == ["192.0.2.0/24"])
        #expect(policy.services["a"]?.addresses.deny.map(\.description) == ["192.0.2.7/32"])
        #expect(policy.keys["k"]?.addresses.deny.map(\.description) == ["::/0"])
        #expect(policy.keys["k"]?.addresses.allow == nil)
    }

    @Test("an entry that is no address or block is refused, naming its key path")
    func refused() {
        guard
            case .failure(let error) = Self.load(
                Self.base + """

                    trustedProxies: [10.0.0.0/33]
                    services:
                      a: { path: /a, denyFrom: [gateway.example], versions: { 1: { proxy: { backend: origin } } } }
                    """)
        else {
            Issue.record("the policy loaded")
            return
        }
        let found = error.diagnostics.map(\.description)
        let expected = "an IP address or a CIDR block such as 10.0.0.0/8 or 2001:db8::/32"
        #expect(found.contains("p.yaml:5: trustedProxies.0: expected \(expected), found \"10.0.0.0/33\""), "\(found)")
        #expect(found.contains("p.yaml:7: services.a.denyFrom.0: expected \(expected), found \"gateway.example\""), "\(found)")
    }
}
