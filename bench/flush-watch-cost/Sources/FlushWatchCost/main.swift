import Foundation
import NIOCore
import NIOPosix

/// Reads what the server side receives, so that the connection stays open and idle.
final class Discard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
}

/// Stands for the timeout handler a completion callback reaches.
final class Watcher {
    var completions = 0
}

let iterations = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 2_000_000
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let server = try ServerBootstrap(group: group).childChannelInitializer { $0.pipeline.addHandler(Discard()) }
    .bind(host: "127.0.0.1", port: 0).wait()
let client = try ClientBootstrap(group: group).connect(to: server.localAddress!).wait()

func nanoseconds(since start: UInt64) -> Double {
    Double(DispatchTime.now().uptimeNanoseconds - start) / Double(iterations)
}

try client.eventLoop.submit {
    for round in 1...3 {
        var start = DispatchTime.now().uptimeNanoseconds
        var unwritten = 0
        for _ in 0..<iterations { unwritten &+= (try? client.syncOptions?.getOption(.bufferedWritableBytes)) ?? 1 }
        let asking = nanoseconds(since: start)

        let watcher = Watcher()
        start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<iterations {
            let written = client.eventLoop.makePromise(of: Void.self)
            let bound = NIOLoopBound((watcher, client), eventLoop: client.eventLoop)
            written.futureResult.whenComplete { _ in bound.value.0.completions += 1 }
            written.succeed(())
        }
        let promising = nanoseconds(since: start)
        precondition(unwritten == 0 && watcher.completions == iterations)
        print(
            "round \(round): asking the channel \(String(format: "%.1f", asking)) ns; "
                + "a promise and its callback \(String(format: "%.1f", promising)) ns")
    }
}.wait()
try client.close().wait()
try server.close().wait()
try group.syncShutdownGracefully()
