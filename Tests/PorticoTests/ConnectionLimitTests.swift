import Logging
import NIOCore
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import Portico

@Suite("Connection limits")
struct ConnectionLimitTests {
    @Test(
        "a listener at maxConnections closes further connections at accept, logs them with a count, and takes new ones once a place frees"
    )
    func maxConnections() async throws {
        let recorder = RecordingLogHandler()
        let logger = Logger(label: "test") { _ in recorder }
        try await withGateway(logger: logger, policy: { "limits: { maxConnections: 3 }\n" + echoServicePolicy($0) }) { gateway, _ in
            // Three connections, each proven accepted by an answer; the fourth is accepted by the
            // kernel, then closed by the gateway without an answer.
            var held = try Self.fillUp(gateway, places: 3)
            let lines = recorder.records.filter { $0.message.hasPrefix("connections refused") }
            #expect(lines.count == 1)
            #expect(lines.first?.metadata["listener"] == "test")
            #expect(lines.first?.metadata["refused"]?.description == "1")
            // The held connections still work.
            #expect(try held[0].request("GET", "/echo").status == 200)
            // Once one of them closes, a new connection gets in (the close reaches the gateway
            // asynchronously: try a bounded number of times).
            held.removeLast().hangUp()
            #expect(await eventually { gateway.gateway.openConnections == 2 })
            #expect(try gateway.connect().request("GET", "/echo").status == 200)
        }
    }

    /// Opens `places` connections, each proven accepted by an answer, then one more that the
    /// gateway must close at accept without an answer; returns the accepted ones.
    static func fillUp(_ gateway: TestGateway, places: Int) throws -> [RawHTTPClient] {
        var held: [RawHTTPClient] = []
        for _ in 0..<places {
            let client = try gateway.connect()
            #expect(try client.request("GET", "/echo").status == 200)
            held.append(client)
        }
        let refused = try gateway.connect()
        try? refused.send("GET /echo HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(refused.waitForClose())
        #expect(refused.unreadBytes == 0)
        #expect(gateway.gateway.refusedConnections["test"] == 1)
        return held
    }

    @Test("one address holds at most maxConnectionsPerAddress connections; another address still gets in; a freed place is taken again")
    func maxConnectionsPerAddress() async throws {
        let policy = { (ports: [Int]) in "limits: { maxConnections: 10, maxConnectionsPerAddress: 2 }\n" + echoServicePolicy(ports) }
        try await withGateway(policy: policy) { gateway, _ in
            // Two from this address; a third is closed at accept, without an answer.
            var held = try Self.fillUp(gateway, places: 2)
            // Another client is not locked out by the first one's connections.
            let other = try gateway.connect(socketOptions: .init(sourceAddress: "127.0.0.2"))
            #expect(try other.request("GET", "/echo").status == 200)
            // The held connections still work, and a place freed is taken again.
            #expect(try held[0].request("GET", "/echo").status == 200)
            held.removeLast().hangUp()
            #expect(await eventually { gateway.gateway.openConnections == 2 })
            #expect(try gateway.connect().request("GET", "/echo").status == 200)
        }
    }

    @Test("the per-address count is kept per address subject, and an address is forgotten with its last connection")
    func perAddressCounting() {
        let connections = ListenerConnections(listener: "t", limit: 5, perAddressLimit: 2, logger: Logger(label: "test"))
        #expect(connections.admit(address: "192.0.2.1"))
        #expect(connections.admit(address: "192.0.2.1"))
        #expect(!connections.admit(address: "192.0.2.1"))
        #expect(connections.admit(address: "2001:db8:1:2::/64"))
        #expect(connections.admit(address: nil))
        #expect(connections.admit(address: "192.0.2.2"))
        // The listener is full now (5), whichever address asks.
        #expect(!connections.admit(address: "192.0.2.3"))
        #expect(connections.refusedCount == 2)
        connections.release(address: "192.0.2.1")
        #expect(connections.openConnections(from: "192.0.2.1") == 1)
        #expect(connections.admit(address: "192.0.2.1"))
        connections.release(address: "192.0.2.2")
        #expect(connections.openConnections(from: "192.0.2.2") == 0)
    }

    @Test("the per-address rate limit counts an IPv6 client by its /64 and an IPv4-mapped one by its IPv4 address")
    func addressSubjects() throws {
        func subject(_ text: String) throws -> String? {
            ClientAddress.rateLimitSubject(try SocketAddress(ipAddress: text, port: 443))
        }
        #expect(try subject("2001:db8:1:2::5") == "2001:db8:1:2::/64")
        #expect(try subject("2001:db8:1:2:ffff:eeee:dddd:cccc") == "2001:db8:1:2::/64")
        #expect(try subject("2001:db8:1:3::5") == "2001:db8:1:3::/64")
        #expect(try subject("::1") == "0:0:0:0::/64")
        #expect(try subject("::ffff:192.0.2.7") == "192.0.2.7")
        #expect(try subject("192.0.2.7") == "192.0.2.7")
        #expect(ClientAddress.rateLimitSubject(nil) == nil)
    }

    @Test("clients rotating addresses inside one IPv6 /64 share one address bucket")
    func ipv6RotationSharesBucket() throws {
        let snapshot = try TestGateway.snapshot(
            policy: """
                backends: { b: { url: "http://127.0.0.1:9" } }
                services:
                  open: { path: /open, addressRateLimit: { rate: 1/h, burst: 2 }, versions: { 1: { proxy: { backend: b } } } }
                """)
        let service = CompiledPolicy(snapshot).rules(named: "open")!
        let limiter = RateLimiter(clock: { 0 })
        var outcomes: [Bool] = []
        for host in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2::3", "2001:db8:1:9::1"] {
            let subject = ClientAddress.rateLimitSubject(try SocketAddress(ipAddress: host, port: 1))
            let result = limiter.admit(service: service, tier: nil, keyID: nil, clientAddress: subject, backend: nil)
            if case .success = result { outcomes.append(true) } else { outcomes.append(false) }
        }
        // Burst 2 for the first /64: its third address is refused; another /64 has its own bucket.
        #expect(outcomes == [true, true, false, true])
    }
}
