import Dispatch
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@Suite("Many clients at once")
struct ConcurrencyTests {

    @Test("200 concurrent keep-alive clients each get the answers to their own requests")
    func concurrentClients() async throws {
        try await withGateway(policy: echoServicePolicy) { gateway, servers in
            let clients = 200
            let requestsEach = 5
            let failures = NIOLockedValueBox<[String]>([])
            let answered = NIOLockedValueBox(0)
            let done = DispatchGroup()
            for index in 0..<clients {
                done.enter()
                // A thread each, so that all 200 are connected at once (concurrentPerform would run
                // only as many as there are cores) and none blocks Swift's cooperative pool.
                Thread.detachNewThread {
                    defer { done.leave() }
                    do {
                        let client = try gateway.connect(receiveTimeout: 60)
                        for number in 0..<requestsEach {
                            let body = "client-\(index)-request-\(number)"
                            let response = try client.request("POST", "/echo/\(index)/\(number)?n=\(number)", body: body)
                            answered.withLockedValue { $0 += 1 }
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
            }
            try await offThePool { done.wait() }
            #expect(failures.withLockedValue { $0 }.isEmpty, "\(failures.withLockedValue { $0.prefix(5) })")
            // Every request got its answer: none was lost to a timeout or a dropped connection.
            #expect(answered.withLockedValue { $0 } == clients * requestsEach)
            #expect(servers[0].requestsReceived == clients * requestsEach)
            // The NIO upstream keeps a pool per event loop, each capped at upstream.maxConnectionsPerHost (64).
            #expect(servers[0].connectionsAccepted <= 64 * NIOSingletons.groupLoopCountSuggestion)
        }
    }

    @Test("garbage on many connections gets a well-formed refusal or a close, and does not stop the gateway from serving")
    func garbage() async throws {
        // A short head timeout: garbage that happens to be the start of a valid head is answered 408
        // soon, far within the clients' receive timeout.
        let policy: ([Int]) -> String = { "limits: { headTimeout: 1s }\n" + echoServicePolicy($0) }
        try await withGateway(policy: policy) { gateway, _ in
            let failures = try await offThePool { () -> [String] in
                var failures: [String] = []
                var generator = SystemRandomNumberGenerator()
                for round in 0..<100 {
                    let client = try gateway.connect(receiveTimeout: 30)
                    var bytes = (0..<Int.random(in: 1...2048, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                    if round % 3 == 0 { bytes = Array("GET /echo HTTP/1.1\r\n".utf8) + bytes }
                    try? client.send(bytes)
                    // Half the connections wait for the answer, the others hang up at once.
                    guard round % 2 == 0 else { continue }
                    let sent = "sent \(bytes.prefix(24).map { String($0, radix: 16) })"
                    do {
                        let response = try client.readResponse()
                        if ![400, 408, 413, 431].contains(response.status) {
                            failures.append("round \(round): status \(response.status); \(sent)")
                        }
                    } catch is RawHTTPClient.TimeoutError {
                        failures.append("round \(round): neither an answer nor a close; \(sent)")
                    } catch is RawHTTPClient.MalformedResponseError {
                        failures.append("round \(round): a malformed answer; \(sent)")
                    } catch {
                        // Closed: fine when nothing came before (an answer cut short is not).
                        if client.receivedBytes > 0 { failures.append("round \(round): an answer cut short; \(sent)") }
                    }
                }
                return failures
            }
            #expect(failures.isEmpty, "\(failures.prefix(5))")
            #expect(try gateway.connect().request("GET", "/echo/still-here").status == 200)
        }
    }
}
