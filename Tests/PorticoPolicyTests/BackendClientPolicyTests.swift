import Testing

@testable import PorticoPolicy

@Suite("Which upstream client a backend uses")
struct BackendClientPolicyTests {
    static let listener = "listeners:\n  - { name: public, port: 0 }\n"

    static func load(_ yaml: String) -> Result<PolicySnapshot, PolicyError> {
        Result { () throws(PolicyError) in try PolicyLoader().load(sources: [(file: "p.yaml", text: listener + yaml)]) }
    }

    @Test("client is optional, may name nio or curl, and is kept as written")
    func choices() throws {
        let snapshot = try Self.load(
            """
            backends:
              plain: { url: "http://127.0.0.1:1" }
              secure: { url: "https://127.0.0.1:2" }
              viaCurl: { url: "http://127.0.0.1:3", client: curl }
              viaNIO: { url: "http://127.0.0.1:4", client: nio }
              secureViaCurl: { url: "https://127.0.0.1:5", client: curl }
            upstream: { idleConnectionTimeout: 5s }
            """
        ).get()
        #expect(snapshot.backend(named: "plain")?.client == nil)
        #expect(snapshot.backend(named: "secure")?.client == nil)
        #expect(snapshot.backend(named: "viaCurl")?.client == .curl)
        #expect(snapshot.backend(named: "viaNIO")?.client == .nio)
        #expect(snapshot.backend(named: "secureViaCurl")?.client == .curl)
        #expect(snapshot.policy.upstream.idleConnectionTimeout == .seconds(5))
    }

    @Test("the NIO client for an https backend, or an unknown client, is refused naming file, line and key path")
    func refused() {
        let diagnostics: [String]
        switch Self.load(
            "backends:\n  secure: { url: \"https://127.0.0.1:2\", client: nio }\n  other: { url: \"http://h\", client: wget }\n")
        {
        case .success: diagnostics = []
        case .failure(let error): diagnostics = error.diagnostics.map(\.description)
        }
        #expect(
            diagnostics.contains {
                $0.hasPrefix("p.yaml:4: backends.secure.client: client nio speaks plain HTTP only; an https:// backend needs client curl")
            }, "\(diagnostics)")
        #expect(
            diagnostics.contains { $0.hasPrefix("p.yaml:5: backends.other.client: expected one of nio, curl, found wget") },
            "\(diagnostics)")
    }
}
