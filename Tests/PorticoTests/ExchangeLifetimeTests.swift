import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import PorticoUpstream
import Testing

@testable import Portico

/// An exchange must be freed once its response is sent. The connection's exchange holds its
/// upstream task, and the task's handler holds the exchange: unless one side lets go when the
/// exchange ends, every proxied request stays in memory (it did: about 3 KB per request).
@Suite("Exchange lifetime")
struct ExchangeLifetimeTests {
    static let policy = """
        listeners:
          - { name: embedded, address: 127.0.0.1, port: 0 }
        accessLog: { enabled: false }
        backends:
          quotes: { url: "http://127.0.0.1:9" }
        services:
          stockQuote:
            path: /api/{version}/stockquote
            versions:
              1: { proxy: { backend: quotes } }
        """

    @Test("a proxied exchange is freed after its response, even when the upstream task keeps its handler")
    func freedAfterResponse() throws {
        let witness = ExchangeWitness()
        let connection = try StagedConnection(policy: Self.policy, upstream: HandlerKeepingUpstream()) { services, _ in
            RequestStages(stages: RequestStages.standard(services).stages + [witness])
        }
        defer { connection.finish() }
        connection.send("GET /api/1/stockquote/AAPL HTTP/1.1\r\nHost: gateway.test\r\n\r\n")
        let response = try connection.output()
        #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(response)")
        #expect(response.hasSuffix("\r\n\r\nanswer"))
        #expect(witness.seen == 1)
        #expect(witness.exchange == nil, "the exchange outlived its response")
    }
}

/// Sees every exchange that reaches the end of the stages, and keeps it weakly.
final class ExchangeWitness: RequestStage, @unchecked Sendable {
    // Unchecked: used on the one embedded event loop only.
    weak var exchange: Exchange?
    var seen = 0

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        self.exchange = exchange
        seen += 1
        return .proceed
    }
}

/// Answers every request at once with a 200 and keeps the handler in the task it returns, as a
/// client is free to do: the gateway must not rely on the client to break the cycle.
struct HandlerKeepingUpstream: UpstreamClient {
    func execute(_ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler) -> any UpstreamTask {
        let task = Task(handler: NIOLoopBound(handler, eventLoop: eventLoop))
        eventLoop.execute {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: "6")
            task.handler.value.upstreamReceived(
                UpstreamEvents(
                    head: UpstreamResponseHead(status: 200, headers: headers, contentLength: 6), body: ByteBuffer(string: "answer"),
                    result: .success(UpstreamMetrics(duration: .zero, newConnections: 0))))
        }
        return task
    }

    func shutdown() {}

    final class Task: UpstreamTask {
        let handler: NIOLoopBound<any UpstreamResponseHandler>
        init(handler: NIOLoopBound<any UpstreamResponseHandler>) { self.handler = handler }
        func cancel() {}
        func consumed(bytes: Int) {}
    }
}
