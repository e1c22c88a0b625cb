import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import PorticoTLS
import PorticoTestSupport
import Testing

/// The client handler without sockets: two `EmbeddedChannel`s, the client handler on one and the
/// gateway's own server handler on the other, ciphertext carried between them by hand.
@Suite("The TLS client handler, byte by byte")
struct TLSClientHandlerTests {
    struct Pair {
        let client: EmbeddedChannel
        let server: EmbeddedChannel
    }

    static func pair(ca: String = "ca.pem", serverName: String = "localhost") throws -> Pair {
        let serverContext = try TLSContext(
            configuration: TLSConfiguration(certificates: [
                .init(certificateChain: TestCertificates.path("localhost.pem"), privateKey: TestCertificates.path("localhost-key.pem"))
            ]))
        let server = EmbeddedChannel()
        try server.pipeline.syncOperations.addHandler(try #require(TLSServerHandler(context: serverContext)))
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let client = EmbeddedChannel()
        let context = try TLSClientContext(caFile: TestCertificates.path(ca))
        try client.pipeline.syncOperations.addHandler(try TLSClientHandler(context: context, serverName: serverName))
        return Pair(client: client, server: server)
    }

    /// Moves ciphertext both ways until neither side has more to send; the errors either side's
    /// pipeline ended with.
    @discardableResult
    static func pump(_ pair: Pair) -> [any Error] {
        var errors: [any Error] = []
        var moved = true
        while moved {
            moved = false
            while let bytes = try? pair.client.readOutbound(as: ByteBuffer.self) {
                moved = true
                do { try pair.server.writeInbound(bytes) } catch { errors.append(error) }
            }
            while let bytes = try? pair.server.readOutbound(as: ByteBuffer.self) {
                moved = true
                do { try pair.client.writeInbound(bytes) } catch { errors.append(error) }
            }
        }
        return errors
    }

    static func plaintext(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let buffer = try channel.readInbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        return text
    }

    @Test("writes made before the handshake wait, and go out encrypted and in order once it is done")
    func writesWait() throws {
        let pair = try Self.pair()
        try pair.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let done = NIOLockedValueBox(0)
        for text in ["first ", "second"] {
            let promise = pair.client.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenSuccess { done.withLockedValue { $0 += 1 } }
            pair.client.write(ByteBuffer(string: text), promise: promise)
        }
        pair.client.flush()
        // Only the ClientHello has left: a handshake record (type 22), no plaintext.
        let hello = try #require(try pair.client.readOutbound(as: ByteBuffer.self))
        #expect(hello.getInteger(at: 0, as: UInt8.self) == 22)
        #expect(!String(buffer: hello).contains("first"))
        #expect(done.withLockedValue { $0 } == 0)
        try pair.server.writeInbound(hello)
        #expect(Self.pump(pair).isEmpty)
        #expect(done.withLockedValue { $0 } == 2)
        #expect(try Self.plaintext(pair.server) == "first second")
        // And back.
        try pair.server.writeAndFlush(ByteBuffer(string: "+OK\r\n")).wait()
        #expect(Self.pump(pair).isEmpty)
        #expect(try Self.plaintext(pair.client) == "+OK\r\n")
    }

    @Test(
        "a server the client cannot verify is refused: the waiting writes fail, the reason is OpenSSL's, the channel closes",
        arguments: [("foreign-ca.pem", "localhost", "server certificate: "), ("ca.pem", "redis.example", "hostname mismatch")])
    func refused(_ ca: String, _ serverName: String, _ words: String) throws {
        let pair = try Self.pair(ca: ca, serverName: serverName)
        try pair.client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let failure = NIOLockedValueBox<(any Error)?>(nil)
        let promise = pair.client.eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenFailure { error in failure.withLockedValue { $0 = error } }
        pair.client.writeAndFlush(ByteBuffer(string: "AUTH secret"), promise: promise)
        let errors = Self.pump(pair)
        let tlsError = try #require(errors.compactMap { $0 as? TLSError }.first, "\(errors)")
        #expect(tlsError.kind == .handshakeFailed)
        #expect(tlsError.description.contains(words), "\(tlsError)")
        #expect(tlsError.description.contains("certificate verify failed"), "\(tlsError)")
        #expect(failure.withLockedValue { $0 } is TLSError)
        #expect(!pair.client.isActive)
        #expect(try Self.plaintext(pair.server) == "", "nothing reached the server in the clear or otherwise")
    }
}
