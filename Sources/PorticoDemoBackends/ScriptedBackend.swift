import NIOCore
import NIOPosix
import Synchronization

/// A request head as a ``ScriptedBackend`` read it.
public struct ScriptedRequest: Sendable {
    public var method: String
    public var target: String
    /// 1 for a connection's first request, 2 for the next one on it, and so on.
    public var indexOnConnection: Int
    /// The head's fields as sent, names as written.
    public var fields: [(name: String, value: String)] = []

    /// The first field named `name` (compared without case).
    public func field(_ name: String) -> String? {
        fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// A backend that answers with exactly the bytes a test scripted, framing mistakes included.
///
/// ``BackendServer`` frames every answer correctly through NIO's HTTP encoder, so it cannot send a
/// second `Content-Length`, a body longer than declared or a close in the middle of a body. This one
/// has no HTTP encoder: it reads request heads (and skips request bodies by their `Content-Length`),
/// and for each request performs the steps its script returns, each as one write. Tests use it to
/// show how the gateway treats a backend that breaks HTTP/1.1 framing.
///
/// It counts accepted and closed connections, so a test can wait for the gateway to hang up.
public final class ScriptedBackend: Sendable {
    /// One thing the backend does in answer to a request.
    public enum Step: Sendable {
        /// Writes and flushes these bytes in one write, so bytes of one step reach the socket
        /// together (a test relies on this to put a body's last byte and the excess in one segment).
        case send(ByteBuffer)
        /// Waits before the next step. Only shapes the stream (the steps before it usually reach the
        /// client in a read of their own): nothing guarantees when the client reads, so no test may
        /// depend on it for its outcome.
        case pause(TimeAmount)
        /// Waits for `future` (a test's promise) before the next step, to write at a moment the test
        /// chooses, such as after the client has finished reading the response.
        case after(EventLoopFuture<Void>)
        /// Closes the connection; later steps and requests are ignored.
        case close

        /// Bytes given as text (ASCII, `\r\n` written out by the test).
        public static func text(_ text: String) -> Step { .send(ByteBuffer(string: text)) }

        /// `count` bytes of `x`, for bodies too large to spell out.
        public static func filler(_ count: Int) -> Step {
            var buffer = ByteBuffer()
            buffer.writeRepeatingByte(UInt8(ascii: "x"), count: count)
            return .send(buffer)
        }
    }

    /// Decides the steps that answer a request. Called on the connection's event loop.
    public typealias Script = @Sendable (ScriptedRequest) -> [Step]

    public let port: Int
    private let channel: any Channel
    private let counters: Counters

    final class Counters: Sendable {
        let accepted = Atomic<Int>(0)
        let closed = Atomic<Int>(0)
        let requests = Atomic<Int>(0)
        let bytesSent = Atomic<Int>(0)
    }

    /// Connections accepted so far.
    public var connectionsAccepted: Int { counters.accepted.load(ordering: .relaxed) }
    /// Connections that have closed so far, whichever side closed them.
    public var connectionsClosed: Int { counters.closed.load(ordering: .relaxed) }
    /// Request heads read so far.
    public var requestsReceived: Int { counters.requests.load(ordering: .relaxed) }
    /// Bytes of `send` steps the socket has taken so far (on loopback: the client can read them).
    public var bytesSent: Int { counters.bytesSent.load(ordering: .relaxed) }

    /// Waits until `condition` holds for this backend's counters, checking every 20 ms at most
    /// `tries` times (10 s by default); false if it never did. For tests waiting on what another
    /// thread does to the backend: the bound only keeps a broken test from hanging, and nothing may
    /// be concluded from how long the wait took.
    public func waitUntil(tries: Int = 500, _ condition: (ScriptedBackend) -> Bool) async throws -> Bool {
        for _ in 0..<tries {
            if condition(self) { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition(self)
    }

    private init(port: Int, channel: any Channel, counters: Counters) {
        self.port = port
        self.channel = channel
        self.counters = counters
    }

    public static func start(
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, script: @escaping Script
    ) async throws -> ScriptedBackend {
        let counters = Counters()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                counters.accepted.wrappingAdd(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ScriptedBackendHandler(script: script, counters: counters))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return ScriptedBackend(port: channel.localAddress!.port!, channel: channel, counters: counters)
    }

    public func shutdown() async throws {
        try await channel.close()
    }
}

/// Reads request heads off the raw byte stream and performs the script's steps for each.
final class ScriptedBackendHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let script: ScriptedBackend.Script
    private let counters: ScriptedBackend.Counters
    private var received = ByteBuffer()
    /// Request body bytes still to skip before the next request head.
    private var bodyRemaining = 0
    private var closed = false
    /// Requests read on this connection so far.
    private var served = 0

    init(script: @escaping ScriptedBackend.Script, counters: ScriptedBackend.Counters) {
        self.script = script
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var part = unwrapInboundIn(data)
        received.writeBuffer(&part)
        while !closed {
            if bodyRemaining > 0 {
                let skipped = min(bodyRemaining, received.readableBytes)
                received.moveReaderIndex(forwardBy: skipped)
                bodyRemaining -= skipped
                if bodyRemaining > 0 { return }
            }
            let view = received.readableBytesView
            guard let end = view.firstRange(of: Array("\r\n\r\n".utf8)) else { return }
            let head = String(decoding: view[view.startIndex..<end.lowerBound], as: UTF8.self)
            received.moveReaderIndex(to: end.upperBound)
            answer(head, context: context)
        }
    }

    private func answer(_ head: String, context: ChannelHandlerContext) {
        counters.requests.wrappingAdd(1, ordering: .relaxed)
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let requestLine = lines.first?.split(separator: " ") ?? []
        var fields: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            fields.append((String(parts[0]), String(parts[1].trimmingPrefix(" "))))
            if parts[0].lowercased() == "content-length" {
                bodyRemaining = Int(parts[1].trimmingPrefix(" ")) ?? 0
            }
        }
        served += 1
        let request = ScriptedRequest(
            method: requestLine.first.map(String.init) ?? "", target: requestLine.dropFirst().first.map(String.init) ?? "",
            indexOnConnection: served, fields: fields)
        perform(script(request)[...], context: context)
    }

    private func perform(_ steps: ArraySlice<ScriptedBackend.Step>, context: ChannelHandlerContext) {
        for (index, step) in zip(steps.indices, steps) {
            guard !closed else { return }
            switch step {
            case .send(let bytes):
                let count = bytes.readableBytes
                let counters = self.counters
                context.writeAndFlush(wrapOutboundOut(bytes)).whenSuccess { counters.bytesSent.wrappingAdd(count, ordering: .relaxed) }
            case .pause(let delay):
                let rest = steps[(index + 1)...]
                context.eventLoop.assumeIsolated().scheduleTask(in: delay) { self.perform(rest, context: context) }
                return
            case .after(let future):
                let rest = steps[(index + 1)...]
                future.hop(to: context.eventLoop).assumeIsolated().whenComplete { _ in self.perform(rest, context: context) }
                return
            case .close:
                closed = true
                context.close(promise: nil)
                return
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closed = true
        counters.closed.wrappingAdd(1, ordering: .relaxed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
