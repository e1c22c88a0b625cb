import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import Portico

/// A stage that waits on the network must not block the connection: the gateway's real pipeline on
/// an `EmbeddedChannel`, with a stage that suspends until the test completes its future.
@Suite struct SuspendingStageTests {
    /// Answers every request that reaches it.
    struct ReachedStage: RequestStage {
        func process(_ exchange: Exchange, on eventLoop: any EventLoop) -> StageOutcome {
            .answer(.badRequest("reached the stage after the parked one"))
        }
    }

    static func connection() throws -> StagedConnection {
        try StagedConnection(policy: EmbeddedGateway.policy, upstream: UnreachableUpstream()) { _, parked in
            RequestStages(stages: [HeadChecksStage(), parked, ReachedStage()])
        }
    }

    /// Counts the reads that reach the socket.
    final class ReadCounter: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = NIOAny
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    /// What a client sends after a request that asks to switch protocols is not HTTP: the
    /// connection is not read while that request is answered (or until a switch hands it over),
    /// so that it cannot pile up in the decoder; after an ordinary request reads go on.
    @Test(arguments: [
        ("GET /a HTTP/1.1\r\nHost: t\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n", true),
        ("CONNECT t:443 HTTP/1.1\r\nHost: t:443\r\n\r\n", true),
        ("GET /a HTTP/1.1\r\nHost: t\r\nUpgrade: h2c\r\n\r\n", false),
        ("GET /a HTTP/1.1\r\nHost: t\r\n\r\n", false),
    ])
    func noReadsAfterAnUpgradeRequest(request: String, holds: Bool) throws {
        let counter = ReadCounter()
        let connection = try StagedConnection(policy: EmbeddedGateway.policy, upstream: UnreachableUpstream(), bottom: counter) {
            _, parked in RequestStages(stages: [parked, ReachedStage()])
        }
        connection.send(request)
        #expect(connection.parked.promises.withLockedValue { $0.count } == 1)
        let before = counter.reads
        connection.channel.read()
        #expect(counter.reads == before + (holds ? 0 : 1))
        connection.resume(.proceed)
        #expect(try connection.output().hasPrefix("HTTP/1.1 400 "))
        connection.finish()
    }

    @Test func theNextStageRunsOnlyOnceTheSuspendedOneProceeds() throws {
        let connection = try Self.connection()
        connection.send("GET /api/v1/stockquote HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try connection.output() == "")
        #expect(connection.parked.promises.withLockedValue { $0.count } == 1)
        connection.resume(.proceed)
        let answer = try connection.output()
        #expect(answer.hasPrefix("HTTP/1.1 400 "))
        #expect(answer.contains("reached the stage after the parked one"))
        connection.finish()
    }

    @Test func aSuspendedStagesAnswerEndsTheExchangeAndTheConnectionServesTheNextRequest() throws {
        let connection = try Self.connection()
        connection.send("POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody")
        connection.resume(.answer(.notFound(path: "/a")))
        #expect(try connection.output().hasPrefix("HTTP/1.1 404 "))
        connection.send("GET /b HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(connection.parked.promises.withLockedValue { $0.count } == 1)
        connection.resume(.answer(.notFound(path: "/b")))
        let second = try connection.output()
        #expect(second.hasPrefix("HTTP/1.1 404 "))
        #expect(second.contains("/b"))
        connection.finish()
    }

    @Test func aFailedSuspensionIsAnsweredWithAProblem() throws {
        let connection = try Self.connection()
        connection.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
        struct Broken: Error {}
        let promise = connection.parked.promises.withLockedValue { $0.removeFirst() }
        promise.fail(Broken())
        connection.channel.embeddedEventLoop.run()
        let answer = try connection.output()
        #expect(answer.hasPrefix("HTTP/1.1 500 "))
        #expect(answer.contains("urn:portico:problem:internal-error"))
        connection.finish()
    }

    @Test func aStageResumingAfterTheClientLeftWritesNothing() throws {
        let connection = try Self.connection()
        connection.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
        let promise = connection.parked.promises.withLockedValue { $0.removeFirst() }
        _ = try? connection.channel.close().wait()
        _ = try connection.output()
        promise.succeed(.proceed)
        connection.channel.embeddedEventLoop.run()
        #expect(try connection.output() == "")
    }
}
