import Logging
import NIOCore
import NIOEmbedded
import PorticoPolicy
import PorticoUpstream
import Testing

@testable import Portico

/// The gateway's connection pipeline on an `EmbeddedChannel` with its standard stages, and a policy whose signed service
/// lives under `/api/{version}/stockquote` and a backend that is never called.
enum EmbeddedGateway {
    static let policy = """
        listeners:
          - { name: embedded, address: 127.0.0.1, port: 0 }
        accessLog: { enabled: false }
        backends:
          quotes: { url: "http://127.0.0.1:9" }
        services:
          stockQuote:
            path: /api/{version}/stockquote
            auth: signature
            versions:
              1: { proxy: { backend: quotes } }
        keys:
          demo-app: { secret: demo-only-secret-published-in-the-portico-repository, demo: true, services: [stockQuote] }
        """

    /// Sends `input` on a fresh connection (``StagedConnection`` with the standard stages),
    /// closes it, and returns everything the gateway wrote.
    static func exchange(_ input: String) throws -> String {
        let connection = try StagedConnection(policy: policy, upstream: UnreachableUpstream()) { services, _ in .standard(services) }
        connection.send(input)
        let output = try connection.output()
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
        return output
    }
}

/// An upstream no test here reaches: every route of ``EmbeddedGateway/policy`` is refused earlier.
struct UnreachableUpstream: UpstreamClient {
    func execute(_ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler) -> any UpstreamTask {
        Issue.record("the request reached the backend: \(request.url)")
        let handler = NIOLoopBound(handler, eventLoop: eventLoop)
        eventLoop.execute { handler.value.upstreamReceived(UpstreamEvents(result: .failure(.init(.connectFailed, detail: "unreachable")))) }
        return NoTask()
    }

    func shutdown() {}

    private struct NoTask: UpstreamTask {
        func cancel() {}
        func consumed(bytes: Int) {}
    }
}
