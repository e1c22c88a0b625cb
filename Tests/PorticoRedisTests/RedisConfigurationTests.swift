import Testing

@testable import PorticoRedis

@Suite("Redis configuration")
struct RedisConfigurationTests {
    static let password = "correct-horse-battery-staple-42"

    @Test("the password appears in no description, debug description, reflection or dump of the configuration")
    func passwordRedacted() {
        let configuration = RedisConfiguration(host: "redis.internal", port: 6380, password: Self.password, database: 2)
        var dumped = ""
        dump(configuration, to: &dumped)
        var dumpedClient = ""
        let renderings = [
            configuration.description, configuration.debugDescription, String(describing: configuration),
            String(reflecting: configuration), "\(configuration)", dumped,
            Mirror(reflecting: configuration).children.map { "\($0.label ?? ""): \($0.value)" }.joined(separator: ", "),
        ]
        for rendering in renderings {
            #expect(!rendering.contains(Self.password), "\(rendering)")
            #expect(!rendering.contains(String(Self.password.prefix(8))), "\(rendering)")
        }
        // What it does show is enough to tell configurations apart.
        #expect(configuration.description.contains("redis://redis.internal:6380"))
        #expect(configuration.description.contains("password set"))
        #expect(RedisConfiguration(host: "::1", port: 1).description.hasPrefix("redis://[::1]:1 "))
        #expect(dumped.contains("redis.internal") && dumped.contains("set"))
        // Nor through a structure that holds one.
        struct Holder { let configuration: RedisConfiguration }
        dump(Holder(configuration: configuration), to: &dumpedClient)
        #expect(!dumpedClient.contains(Self.password), "\(dumpedClient)")
        // The handshake still sends it.
        #expect(configuration.handshake.first == .command(["AUTH", Self.password]))
    }
}
