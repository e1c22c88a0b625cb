import Dispatch
import Foundation
import NIOConcurrencyHelpers
import PorticoDemoBackends
import Testing

@Suite("Many clients at once")
struct ConcurrencyTests {

    @Test("200 concurrent keep-alive clients each get the answers to their own requests")
    func concurrentClients() async throws {
        try await withGateway(policy: echoServicePolicy) { gateway, servers in
            let clients = 200
            let requestsEach = 5
            let failures = NIOLockedValueBox<[String]>([])
            DispatchQueue.concurrentPerform(iterations: clients) { index in
                do {
                    let client = try gateway.connect(receiveTimeout: 20)
                    for number in 0..<requestsEach {
                        let body = "client-\(index)-request-\(number)"
                        let response = try client.request("POST", "/echo/\(index)/\(number)?n=\(number)", body: body)
                        let json = response.json
                        if response.status != 200 || json?["path"] as? String != "/echo/\(index)/\(number)"
                            || json?["body"] as? String != body
                        {
                            failures.withLockedValue { $0.append("client \(index) request \(number): \(response.status)") }
                        }
                    }
                } catch {
                    failures.withLockedValue { $0.append("client \(index): \(error)") }
                }
            }
            #expect(failures.withLockedValue { $0 }.isEmpty, "\(failures.withLockedValue { $0.prefix(5) })")
            #expect(servers[0].requestsReceived == clients * requestsEach)
            #expect(servers[0].connectionsAccepted <= 64)
        }
    }

    @Test("garbage on many connections does not stop the gateway from serving")
    func garbage() async throws {
        try await withGateway(policy: echoServicePolicy) { gateway, _ in
            var generator = SystemRandomNumberGenerator()
            for round in 0..<100 {
                let client = try gateway.connect(receiveTimeout: 5)
                var bytes = (0..<Int.random(in: 1...2048, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if round % 3 == 0 { bytes = Array("GET /echo HTTP/1.1\r\n".utf8) + bytes }
                try? client.send(bytes)
                if round % 2 == 0 {
                    // Half the connections wait for the answer, the others hang up at once.
                    if let response = try? client.readResponse() {
                        #expect([400, 408, 413, 431].contains(response.status), "round \(round): \(response.status)")
                    }
                }
            }
            #expect(try gateway.connect().request("GET", "/echo/still-here").status == 200)
        }
    }
}
