import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A backend that answers with exactly the bytes a test scripts, for responses no well-behaved
/// server would send (conflicting framing, extra bytes, a close at a chosen moment).
///
/// It reads each request up to the end of its head plus its `Content-Length`, then asks the script
/// what to do, given which request this is on its connection (1, 2, …).
final class RawBackend: Sendable {
    enum Reply: Sendable {
        /// Write these bytes; then close when `close` is set (whatever the bytes said).
        case send(String, close: Bool = false)
        /// Close without answering.
        case close
        /// Never answer.
        case hang
    }

    /// A received request: its number on its connection, and its head and body as text.
    struct Request: Sendable {
        var indexOnConnection: Int
        var text: String
    }

    typealias Script = @Sendable (Request) -> Reply

    let port: Int
    private let channel: any Channel
    private let counters: Counters

    final class Counters: Sendable {
        let accepted = Atomic<Int>(0)
        let closed = Atomic<Int>(0)
        let requests = Atomic<Int>(0)
        let lastRequest = Mutex<String>("")
    }

    var connectionsAccepted: Int { counters.accepted.load(ordering: .relaxed) }
    var connectionsClosed: Int { counters.closed.load(ordering: .relaxed) }
    var requestsReceived: Int { counters.requests.load(ordering: .relaxed) }
    var lastRequest: String { counters.lastRequest.withLock { $0 } }

    private init(port: Int, channel: any Channel, counters: Counters) {
        self.port = port
        self.channel = channel
        self.counters = counters
    }

    static func start(script: @escaping Script) async throws -> RawBackend {
        let counters = Counters()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counters.accepted.wrappingAdd(1, ordering: .relaxed)
                channel.closeFuture.whenComplete { _ in counters.closed.wrappingAdd(1, ordering: .relaxed) }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RawBackendHandler(script: script, counters: counters))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return RawBackend(port: channel.localAddress!.port!, channel: channel, counters: counters)
    }

    func shutdown() async throws {
        try await channel.close()
    }
}

private final class RawBackendHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let script: RawBackend.Script
    private let counters: RawBackend.Counters
    private var received = ByteBuffer()
    private var served = 0
    private var hanging = false

    init(script: @escaping RawBackend.Script, counters: RawBackend.Counters) {
        self.script = script
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.writeBuffer(&bytes)
        while !hanging, let request = nextRequest() {
            served += 1
            counters.requests.wrappingAdd(1, ordering: .relaxed)
            counters.lastRequest.withLock { $0 = request }
            switch script(RawBackend.Request(indexOnConnection: served, text: request)) {
            case .send(let text, let close):
                let written = context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text)))
                if close {
                    let channel = context.channel
                    written.whenComplete { _ in channel.close(promise: nil) }
                    return
                }
            case .close:
                context.close(promise: nil)
                return
            case .hang:
                hanging = true
            }
        }
    }

    /// Takes one whole request (head and `Content-Length` body) off the buffer, if it has arrived.
    private func nextRequest() -> String? {
        let text = String(buffer: received)
        guard let headEnd = text.range(of: "\r\n\r\n") else { return nil }
        let head = text[..<headEnd.lowerBound]
        var length = 0
        for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: " ")) ?? 0
        }
        let headBytes = text[..<headEnd.upperBound].utf8.count
        guard received.readableBytes >= headBytes + length else { return nil }
        let request = received.readString(length: headBytes + length)!
        received.discardReadBytes()
        return request
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Character) -> Substring {
        var text = self
        while text.first == set { text.removeFirst() }
        while text.last == set { text.removeLast() }
        return text
    }
}
