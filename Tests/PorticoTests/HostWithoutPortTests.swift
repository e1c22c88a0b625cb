import Testing

@testable import Portico

/// The `Host` value routes compare: lowercased, without its port, an IPv6 literal with its brackets.
@Suite("A Host field's host, as routes compare it")
struct HostWithoutPortTests {
    @Test("the port goes, case folds, brackets stay; a host already in lowercase is its own slice")
    func hosts() {
        #expect(Route.hostWithoutPort("partner.example:8443") == "partner.example")
        #expect(Route.hostWithoutPort("Partner.Example") == "partner.example")
        #expect(Route.hostWithoutPort("partner.example") == "partner.example")
        #expect(Route.hostWithoutPort("[::1]:8080") == "[::1]")
        #expect(Route.hostWithoutPort("[FE80::1]") == "[fe80::1]")
        #expect(Route.hostWithoutPort("127.0.0.1:") == "127.0.0.1")
        #expect(Route.hostWithoutPort("") == "")
        // Without its closing bracket the text before the first colon is all there is.
        #expect(Route.hostWithoutPort("[::1") == "[")
    }
}
