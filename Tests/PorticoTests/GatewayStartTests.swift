import NIOCore
import NIOPosix
import PorticoDemoBackends
import PorticoPolicy
import Testing

@testable import Portico

@Suite("Starting the gateway")
struct GatewayStartTests {
    @Test("a listener whose port is taken fails the start with a message naming the listener and address")
    func portTaken() async throws {
        let occupant = try await BackendServer.start(handler: DemoBackends.echo)
        let snapshot = try PolicyLoader().load(sources: [
            (file: "p.yaml", text: "listeners:\n  - { name: public, address: 127.0.0.1, port: \(occupant.port) }\n")
        ])
        let gateway = Gateway(snapshot: snapshot)
        do {
            try await gateway.start()
            Issue.record("the start should have failed")
        } catch let error as ListenerBindError {
            #expect(error.description == "cannot listen on 127.0.0.1:\(occupant.port) (listener \"public\"): Address already in use")
        }
        await gateway.shutdown()
        try await occupant.shutdown()
    }
}
