import Testing

@testable import PorticoPolicy

@Suite("Streams in the policy: websocket, limits, heartbeat and tiers' maxUpgraded")
struct StreamPolicyTests: LoadsPolicyText {
    static let backends = "backends: { chat: { url: \"http://127.0.0.1:9\" } }"

    @Test("a service's websocket, limits and heartbeat, and a tier's maxUpgraded, are read with their units; all are off by default")
    func read() throws {
        let snapshot = try Self.load(
            """
            listeners: [{ name: a, port: 0 }]
            \(Self.backends)
            services:
              chat:
                path: /chat
                websocket: true
                heartbeat: 15s
                limits: { maxUpgraded: 100, streamIdleTimeout: 5m, streamMaxLifetime: 1h }
                versions: { 1: { proxy: { backend: chat } } }
              plain: { path: /plain, versions: { 1: { proxy: { backend: chat } } } }
            tiers:
              standard: { rate: 10/s, burst: 10, maxUpgraded: 3 }
            """
        ).get()
        let chat = try #require(snapshot.policy.services["chat"])
        #expect(chat.websocket)
        #expect(chat.heartbeat == .seconds(15))
        #expect(chat.streams == ServiceStreamLimits(maxUpgraded: 100, idleTimeout: .seconds(300), maxLifetime: .seconds(3600)))
        let plain = try #require(snapshot.policy.services["plain"])
        #expect(!plain.websocket && plain.heartbeat == nil && plain.streams == ServiceStreamLimits())
        #expect(snapshot.policy.tiers["standard"]?.maxUpgraded == 3)
    }

    @Test("wrong values are refused, each naming its key path")
    func refused() {
        let found = Self.diagnostics(
            """
            listeners: [{ name: a, port: 0 }]
            \(Self.backends)
            services:
              chat:
                path: /chat
                websocket: yes please
                heartbeat: -1s
                limits: { maxUpgraded: -1, streamIdleTimeout: soon, lifetime: 1h }
                versions: { 1: { proxy: { backend: chat } } }
            tiers:
              standard: { rate: 10/s, burst: 10, maxUpgraded: many }
            """)
        #expect(found.contains { $0.contains("services.chat.websocket") && $0.contains("true or false") }, "\(found)")
        #expect(found.contains { $0.contains("services.chat.heartbeat") && $0.contains("positive duration") }, "\(found)")
        #expect(found.contains { $0.contains("services.chat.limits.maxUpgraded") }, "\(found)")
        #expect(found.contains { $0.contains("services.chat.limits.streamIdleTimeout") }, "\(found)")
        #expect(found.contains { $0.contains("services.chat.limits") && $0.contains("lifetime") }, "\(found)")
        #expect(found.contains { $0.contains("tiers.standard.maxUpgraded") }, "\(found)")
    }

    @Test("websocket: true on a service none of whose versions is proxied is a warning: only a proxy passes an upgrade on")
    func warning() throws {
        let snapshot = try Self.load(
            """
            listeners: [{ name: a, port: 0 }]
            \(Self.backends)
            services:
              coded: { path: /coded, websocket: true, versions: { 1: { code: { name: hello, backends: [chat] } } } }
            """
        ).get()
        #expect(snapshot.warnings.contains { $0.description.contains("services.coded.websocket") }, "\(snapshot.warnings)")
    }
}
