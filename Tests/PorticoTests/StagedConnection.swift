import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import PorticoPolicy
import PorticoUpstream

@testable import Portico

/// Suspends every request on a promise the test completes: a stage waiting on the network.
final class ParkedStage: RequestStage {
    let promises = NIOLockedValueBox<[EventLoopPromise<StageOutcome>]>([])

    func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
        let promise = eventLoop.makePromise(of: StageOutcome.self)
        promises.withLockedValue { $0.append(promise) }
        return .suspend(promise.futureResult)
    }
}

/// The gateway's real connection pipeline on an `EmbeddedChannel`, with the stages a test chooses
/// (a ``ParkedStage`` among them, if it likes) and, optionally, a handler of its own at the bottom.
struct StagedConnection {
    let channel: EmbeddedChannel
    let parked = ParkedStage()

    init(
        policy: String, upstream: any UpstreamClient, bottom: (any ChannelHandler)? = nil,
        stages: (GatewayServices, ParkedStage) -> RequestStages
    ) throws {
        let snapshot = try PolicyLoader().load(sources: [(file: "staged.yaml", text: policy)])
        let services = GatewayServices(
            store: PolicyStore(snapshot), upstream: upstream, nonces: InMemoryNonceStore(capacity: 16),
            rateLimiter: RateLimiter(), accessLogger: Logger(label: "portico.test"), scheme: "http")
        channel = EmbeddedChannel()
        try ConnectionPipeline(services: services, limits: snapshot.limits, stages: stages(services, parked))
            .configure(channel.pipeline.syncOperations)
        if let bottom { try channel.pipeline.syncOperations.addHandler(bottom, position: .first) }
        try channel.connect(to: SocketAddress(ipAddress: "192.0.2.1", port: 1)).wait()
    }

    /// Sends `text` and runs the loop; a connection the gateway closed takes nothing more.
    func send(_ text: String) {
        _ = try? channel.writeInbound(ByteBuffer(string: text))
        channel.embeddedEventLoop.run()
    }

    /// Everything the gateway has written since the last call.
    func output() throws -> String {
        var text = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(let buffer) = data { text += String(buffer: buffer) }
        }
        return text
    }

    /// Completes the oldest parked stage's wait with `outcome`.
    func resume(_ outcome: StageOutcome) {
        let promise = parked.promises.withLockedValue { $0.removeFirst() }
        promise.succeed(outcome)
        channel.embeddedEventLoop.run()
    }

    func finish() {
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }
}
