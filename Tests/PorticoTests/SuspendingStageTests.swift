import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import PorticoPolicy
import Testing

@testable import Portico

/// A stage that waits on the network must not block the connection: the gateway's real pipeline on
/// an `EmbeddedChannel`, with a stage that suspends until the test completes its future.
@Suite struct SuspendingStageTests {
    /// Suspends every request on a promise the test completes.
    final class ParkedStage: RequestStage {
        let promises = NIOLockedValueBox<[EventLoopPromise<StageOutcome>]>([])

        func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
            let promise = eventLoop.makePromise(of: StageOutcome.self)
            promises.withLockedValue { $0.append(promise) }
            return .suspend(promise.futureResult)
        }
    }

    /// Answers every request that reaches it.
    struct ReachedStage: RequestStage {
        func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
            .answer(.badRequest("reached the stage after the parked one"))
        }
    }

    struct Connection {
        let channel: EmbeddedChannel
        let parked: ParkedStage

        init() throws {
            let snapshot = try PolicyLoader().load(sources: [(file: "embedded.yaml", text: EmbeddedGateway.policy)])
            let services = GatewayServices(
                store: PolicyStore(snapshot), upstream: UnreachableUpstream(), nonces: InMemoryNonceStore(capacity: 16),
                rateLimiter: RateLimiter(), accessLogger: Logger(label: "portico.test"), scheme: "http")
            parked = ParkedStage()
            let stages = RequestStages(stages: [HeadChecksStage(), parked, ReachedStage()])
            channel = EmbeddedChannel()
            try ConnectionPipeline(services: services, limits: snapshot.limits, stages: stages).configure(channel.pipeline.syncOperations)
            try channel.connect(to: SocketAddress(ipAddress: "192.0.2.1", port: 1)).wait()
        }

        func send(_ text: String) throws {
            try channel.writeInbound(ByteBuffer(string: text))
            channel.embeddedEventLoop.run()
        }

        func output() throws -> String {
            var text = ""
            while let data = try channel.readOutbound(as: IOData.self) {
                if case .byteBuffer(let buffer) = data { text += String(buffer: buffer) }
            }
            return text
        }

        func resume(_ outcome: StageOutcome) {
            let promise = parked.promises.withLockedValue { $0.removeFirst() }
            promise.succeed(outcome)
            channel.embeddedEventLoop.run()
        }
    }

    @Test func theNextStageRunsOnlyOnceTheSuspendedOneProceeds() throws {
        let connection = try Connection()
        try connection.send("GET /api/v1/stockquote HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try connection.output() == "")
        #expect(connection.parked.promises.withLockedValue { $0.count } == 1)
        connection.resume(.proceed)
        let answer = try connection.output()
        #expect(answer.hasPrefix("HTTP/1.1 400 "))
        #expect(answer.contains("reached the stage after the parked one"))
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
    }

    @Test func aSuspendedStagesAnswerEndsTheExchangeAndTheConnectionServesTheNextRequest() throws {
        let connection = try Connection()
        try connection.send("POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody")
        connection.resume(.answer(.notFound(path: "/a")))
        #expect(try connection.output().hasPrefix("HTTP/1.1 404 "))
        try connection.send("GET /b HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(connection.parked.promises.withLockedValue { $0.count } == 1)
        connection.resume(.answer(.notFound(path: "/b")))
        let second = try connection.output()
        #expect(second.hasPrefix("HTTP/1.1 404 "))
        #expect(second.contains("/b"))
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
    }

    @Test func aFailedSuspensionIsAnsweredWithAProblem() throws {
        let connection = try Connection()
        try connection.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
        struct Broken: Error {}
        let promise = connection.parked.promises.withLockedValue { $0.removeFirst() }
        promise.fail(Broken())
        connection.channel.embeddedEventLoop.run()
        let answer = try connection.output()
        #expect(answer.hasPrefix("HTTP/1.1 500 "))
        #expect(answer.contains("urn:portico:problem:internal-error"))
        _ = try? connection.channel.finish(acceptAlreadyClosed: true)
    }

    @Test func aStageResumingAfterTheClientLeftWritesNothing() throws {
        let connection = try Connection()
        try connection.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
        let promise = connection.parked.promises.withLockedValue { $0.removeFirst() }
        _ = try? connection.channel.close().wait()
        _ = try connection.output()
        promise.succeed(.proceed)
        connection.channel.embeddedEventLoop.run()
        #expect(try connection.output() == "")
    }
}
