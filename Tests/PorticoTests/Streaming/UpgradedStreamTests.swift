import NIOCore
import NIOEmbedded
import NIOHTTP1
import PorticoTestSupport
import Testing

@testable import Portico

/// The relay between a client and a backend once both have switched to WebSocket, on embedded
/// channels sharing one embedded event loop: its clock is the test's, so idle and lifetime limits
/// are reached by moving it, and writability is set by hand.
@Suite("An upgraded stream's relay")
struct UpgradedStreamTests {
    struct Pair {
        let loop: EmbeddedEventLoop
        let client: EmbeddedChannel
        let backend: EmbeddedChannel
        let stream: UpgradedStream
        let backendReads: ReadCounter
        let finished: Box

        final class Box { var count = 0 }
    }

    static func pair(idle: Duration? = nil, lifetime: Duration? = nil) throws -> Pair {
        let loop = EmbeddedEventLoop()
        let client = EmbeddedChannel(loop: loop)
        let backend = EmbeddedChannel(loop: loop)
        try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try backend.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()
        let finished = Pair.Box()
        let stream = UpgradedStream(eventLoop: loop, idleTimeout: idle, maxLifetime: lifetime) { _ in finished.count += 1 }
        let clientRelay = StreamRelayHandler(side: .client, stream: stream)
        let backendRelay = StreamRelayHandler(side: .backend, stream: stream)
        stream.join(client: clientRelay, backend: backendRelay)
        let counter = ReadCounter()
        try backend.pipeline.syncOperations.addHandler(counter)
        try client.pipeline.syncOperations.addHandler(clientRelay)
        try backend.pipeline.syncOperations.addHandler(backendRelay)
        stream.start()
        return Pair(loop: loop, client: client, backend: backend, stream: stream, backendReads: counter, finished: finished)
    }

    /// A text frame as a client sends it (masked with zeros, so the payload reads as it is).
    static func clientFrame(_ text: String) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeBytes([0x81, 0x80 | UInt8(text.utf8.count), 0, 0, 0, 0])
        buffer.writeString(text)
        return buffer
    }

    static func serverFrame(_ text: String) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeBytes([0x81, UInt8(text.utf8.count)])
        buffer.writeString(text)
        return buffer
    }

    /// Bytes arriving on `channel` in one read.
    static func deliver(_ bytes: ByteBuffer, to channel: EmbeddedChannel) throws {
        try channel.writeInbound(bytes)
        channel.pipeline.fireChannelReadComplete()
    }

    static func outbound(_ channel: EmbeddedChannel) throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
        return bytes
    }

    @Test("bytes pass both ways as they came, counted each way")
    func relays() throws {
        let pair = try Self.pair()
        try Self.deliver(Self.clientFrame("hi"), to: pair.client)
        #expect(try Self.outbound(pair.backend) == Array(Self.clientFrame("hi").readableBytesView))
        try Self.deliver(Self.serverFrame("hello"), to: pair.backend)
        #expect(try Self.outbound(pair.client) == Array(Self.serverFrame("hello").readableBytesView))
        #expect(pair.stream.bytesFromClient == 8)
        #expect(pair.stream.bytesFromBackend == 7)
    }

    @Test("a side whose peer does not read stops the other side's reads until it drains")
    func backPressure() throws {
        let pair = try Self.pair()
        pair.backend.pipeline.read()
        #expect(pair.backendReads.reads == 1)
        pair.client.isWritable = false
        pair.client.pipeline.fireChannelWritabilityChanged()
        pair.backend.pipeline.read()
        pair.backend.pipeline.read()
        #expect(pair.backendReads.reads == 1)
        pair.client.isWritable = true
        pair.client.pipeline.fireChannelWritabilityChanged()
        #expect(pair.backendReads.reads == 2)
    }

    @Test("idle past its limit, the stream is closed with 1001 to each side, the client's frame unmasked, the backend's masked")
    func idle() throws {
        let pair = try Self.pair(idle: .seconds(10))
        pair.loop.advanceTime(by: .seconds(9))
        try Self.deliver(Self.clientFrame("x"), to: pair.client)
        pair.loop.advanceTime(by: .seconds(9))
        #expect(pair.client.isActive && pair.stream.ending == nil)
        _ = try Self.outbound(pair.backend)
        pair.loop.advanceTime(by: .seconds(2))
        #expect(pair.stream.ending == .idle)
        #expect(try Self.outbound(pair.client) == [0x88, 2, 0x03, 0xE9])
        let toBackend = try Self.outbound(pair.backend)
        try #require(toBackend.count == 8)
        #expect(toBackend[0] == 0x88 && toBackend[1] == 0x82)
        #expect([toBackend[6] ^ toBackend[2], toBackend[7] ^ toBackend[3]] == [0x03, 0xE9])
        #expect(!pair.client.isActive && !pair.backend.isActive)
        #expect(pair.finished.count == 1)
    }

    @Test("at its lifetime a busy stream closes too; mid-frame towards the client, it gets a TCP close and no frame")
    func lifetime() throws {
        let pair = try Self.pair(idle: .seconds(5), lifetime: .seconds(14))
        for _ in 0..<3 {
            pair.loop.advanceTime(by: .seconds(4))
            try Self.deliver(Self.serverFrame("tick"), to: pair.backend)
        }
        #expect(pair.stream.ending == nil)
        // Half a frame from the backend: 10 bytes announced, 3 sent.
        try Self.deliver(ByteBuffer(bytes: [0x82, 10, 1, 2, 3]), to: pair.backend)
        _ = try Self.outbound(pair.client)
        pair.loop.advanceTime(by: .seconds(2))
        #expect(pair.stream.ending == .lifetime)
        #expect(try Self.outbound(pair.client).isEmpty)
        #expect(try Self.outbound(pair.backend).first == 0x88)
        #expect(!pair.client.isActive && !pair.backend.isActive)
    }

    @Test("when the client goes, the backend is closed after what it was sent has left, and the stream ends once")
    func clientCloses() throws {
        let pair = try Self.pair()
        try pair.client.writeInbound(Self.clientFrame("bye"))
        pair.client.pipeline.fireChannelInactive()
        #expect(pair.stream.ending == .clientClosed)
        #expect(try Self.outbound(pair.backend) == Array(Self.clientFrame("bye").readableBytesView))
        #expect(!pair.backend.isActive)
        #expect(pair.finished.count == 1)
    }

    @Test("a close from outside (the gateway's shutdown) sends 1001 before the connection closes")
    func shutdown() throws {
        let pair = try Self.pair()
        let closed = pair.client.close()
        pair.loop.run()
        #expect(throws: Never.self) { try closed.wait() }
        #expect(pair.stream.ending == .shutdown)
        #expect(try Self.outbound(pair.client) == [0x88, 2, 0x03, 0xE9])
        #expect(!pair.backend.isActive)
    }
}

@Suite("WebSocket frames and handshakes")
struct WebSocketFramingTests {
    @Test("the cursor finds frame boundaries for 7-, 16- and 64-bit lengths, masked or not, fed a byte at a time")
    func cursor() {
        var frames: [[UInt8]] = []
        frames.append([0x81, 0x03] + Array("abc".utf8))
        frames.append([0x82, 0x80 | 126, 0x01, 0x00, 9, 9, 9, 9] + [UInt8](repeating: 7, count: 256))
        frames.append([0x82, 127, 0, 0, 0, 0, 0, 1, 0x00, 0x00] + [UInt8](repeating: 1, count: 65536))
        frames.append([0x88, 0x02, 0x03, 0xE8])
        var cursor = WebSocketFrameCursor()
        var boundaries = 0
        for frame in frames {
            for (index, byte) in frame.enumerated() {
                cursor.advance(over: ByteBuffer(bytes: [byte]))
                if index < frame.count - 1 { #expect(!cursor.atBoundary) }
            }
            if cursor.atBoundary { boundaries += 1 }
        }
        #expect(boundaries == 4)
        #expect(cursor.sawClose)
        // All at once, the same.
        var whole = WebSocketFrameCursor()
        whole.advance(over: ByteBuffer(bytes: frames.flatMap { $0 }))
        #expect(whole.atBoundary && whole.sawClose)
    }

    @Test("a 64-bit length with its top bit set loses the cursor: no frame of the gateway's own is written after it")
    func lost() {
        var cursor = WebSocketFrameCursor()
        cursor.advance(over: ByteBuffer(bytes: [0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0]))
        #expect(cursor.lost && !cursor.atBoundary)
    }

    static func head(_ fields: [(String, String)], method: HTTPMethod = .GET) -> HTTPRequestHead {
        HTTPRequestHead(version: .http1_1, method: method, uri: "/chat", headers: HTTPHeaders(fields))
    }

    static let valid: [(String, String)] = [
        ("Upgrade", "websocket"), ("Connection", "keep-alive, Upgrade"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Protocol", "chat, superchat"),
        ("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits"),
    ]

    @Test("RFC 6455's own example: key dGhlIHNhbXBsZSBub25jZQ== is accepted as s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    func accept() throws {
        #expect(WebSocketHandshake.isRequested(Self.head(Self.valid)))
        let handshake = try WebSocketHandshake.request(Self.head(Self.valid), hasBody: false).get()
        #expect(handshake.expectedAccept == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(handshake.protocols == ["chat", "superchat"])
        #expect(handshake.extensions == ["permessage-deflate"])
    }

    @Test("requests that are not a handshake are told why")
    func requestErrors() {
        func error(_ fields: [(String, String)], method: HTTPMethod = .GET, body: Bool = false) -> WebSocketHandshake.RequestError? {
            if case .failure(let error) = WebSocketHandshake.request(Self.head(fields, method: method), hasBody: body) { return error }
            return nil
        }
        let without = { (name: String) in Self.valid.filter { $0.0 != name } }
        #expect(error(Self.valid, method: .POST) == .notGET)
        #expect(error(Self.valid, body: true) == .hasBody)
        #expect(error(without("Sec-WebSocket-Key")) == .badKey)
        #expect(error(without("Sec-WebSocket-Key") + [("Sec-WebSocket-Key", "c2hvcnQ=")]) == .badKey)
        #expect(error(without("Sec-WebSocket-Version") + [("Sec-WebSocket-Version", "8")]) == .unsupportedVersion)
        #expect(!WebSocketHandshake.isRequested(Self.head(without("Connection") + [("Connection", "keep-alive")])))
    }

    @Test("a backend's 101 is checked against the request: accept, Upgrade, extensions and subprotocol")
    func answers() throws {
        let handshake = try WebSocketHandshake.request(Self.head(Self.valid), hasBody: false).get()
        let good: [(String, String)] = [
            ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        ]
        #expect(handshake.problem(withAnswer: HTTPHeaders(good)) == nil)
        #expect(handshake.problem(withAnswer: HTTPHeaders(good + [("Sec-WebSocket-Protocol", "chat")])) == nil)
        #expect(handshake.problem(withAnswer: HTTPHeaders(good + [("Sec-WebSocket-Extensions", "permessage-deflate")])) == nil)
        let wrongAccept = good.map { $0.0 == "Sec-WebSocket-Accept" ? ($0.0, "AAAA") : $0 }
        #expect(handshake.problem(withAnswer: HTTPHeaders(wrongAccept))?.contains("Sec-WebSocket-Accept") == true)
        #expect(handshake.problem(withAnswer: HTTPHeaders(good + [("Sec-WebSocket-Protocol", "other")]))?.contains("other") == true)
        #expect(
            handshake.problem(withAnswer: HTTPHeaders(good + [("Sec-WebSocket-Extensions", "x-unknown")]))?.contains("x-unknown") == true)
        #expect(handshake.problem(withAnswer: HTTPHeaders(Array(good.dropFirst()))) != nil)
    }
}
