import Logging
import NIOCore
import NIOEmbedded
import PorticoPolicy
import PorticoUpstream
import Testing

@testable import Portico

/// The gateway's connection pipeline on an `EmbeddedChannel`, with a policy whose signed service
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

    /// Sends `input` on a fresh connection, closes it, and returns everything the gateway wrote.
    static func exchange(_ input: String) throws -> String {
        let snapshot = try PolicyLoader().load(sources: [(file: "embedded.yaml", text: policy)])
        let services = GatewayServices(
            store: PolicyStore(snapshot), upstream: UnreachableUpstream(), nonces: InMemoryNonceStore(capacity: 16),
            rateLimiter: RateLimiter(), accessLogger: Logger(label: "portico.test"), scheme: "http")
        let channel = EmbeddedChannel()
        try ConnectionPipeline(services: services, limits: snapshot.limits).configure(channel.pipeline.syncOperations)
        try channel.connect(to: SocketAddress(ipAddress: "192.0.2.1", port: 1)).wait()
        _ = try? channel.writeInbound(ByteBuffer(string: input))
        channel.embeddedEventLoop.run()
        var output = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let buffer) = data { output += String(buffer: buffer) }
        }
        _ = try? channel.finish(acceptAlreadyClosed: true)
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
