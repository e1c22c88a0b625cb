import CPorticoOpenSSL
import NIOCore
import NIOEmbedded
import PorticoTLS

/// The TLS handler without sockets: an `EmbeddedChannel` on one side, an OpenSSL client over
/// memory BIOs on the other, bytes moved by hand between them; under it a ``StuckSocket``, above
/// it what a test puts there and a ``Recorder``.
public struct TLSHandlerHarness {
    struct HarnessError: Error {}

    /// An OpenSSL client whose ciphertext the test carries to and from the channel.
    public final class MemoryClient {
        let context: OpaquePointer
        public let ssl: OpaquePointer
        let input: OpaquePointer
        let output: OpaquePointer

        public init() {
            context = portico_tls_client_context_new(0, 0)!
            SSL_CTX_load_verify_locations(context, TestCertificates.path("ca.pem"), nil)
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            ssl = SSL_new(context)!
            input = portico_tls_memory_bio()!
            output = portico_tls_memory_bio()!
            SSL_set_bio(ssl, input, output)
            _ = portico_tls_set_host_name(ssl, "localhost")
            SSL_set1_host(ssl, "localhost")
            SSL_set_connect_state(ssl)
        }

        deinit {
            SSL_free(ssl)
            SSL_CTX_free(context)
        }

        /// Ciphertext the client wants to send.
        public func take() -> ByteBuffer? {
            let pending = Int(BIO_ctrl_pending(output))
            guard pending > 0 else { return nil }
            var bytes = [UInt8](repeating: 0, count: pending)
            _ = BIO_read(output, &bytes, Int32(pending))
            return ByteBuffer(bytes: bytes)
        }

        public func give(_ buffer: ByteBuffer) {
            let bytes = Array(buffer.readableBytesView)
            _ = BIO_write(input, bytes, Int32(bytes.count))
        }

        public func handshake() -> Int32 { SSL_do_handshake(ssl) }

        public func write(_ text: String) {
            let bytes = Array(text.utf8)
            _ = SSL_write(ssl, bytes, Int32(bytes.count))
        }

        /// Plaintext available, and whether close_notify arrived.
        public func read() -> (text: String, closeNotify: Bool) {
            var text = ""
            var chunk = [UInt8](repeating: 0, count: 16384)
            while true {
                let count = SSL_read(ssl, &chunk, Int32(chunk.count))
                if count > 0 {
                    text += String(decoding: chunk.prefix(Int(count)), as: UTF8.self)
                    continue
                }
                return (text, SSL_get_error(ssl, count) == SSL_ERROR_ZERO_RETURN)
            }
        }
    }

    /// Records what reaches the stage above the TLS handler.
    public final class Recorder: ChannelInboundHandler {
        public typealias InboundIn = ByteBuffer
        public var plaintext = ""
        public var events: [TLSConnectionInfo] = []
        public var errors: [TLSError] = []

        public init() {}

        public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            plaintext += String(buffer: unwrapInboundIn(data))
        }

        public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let completed = event as? TLSHandshakeCompleted { events.append(completed.info) }
        }

        public func errorCaught(context: ChannelHandlerContext, error: any Error) {
            if let error = error as? TLSError { errors.append(error) }
        }
    }

    public let channel: EmbeddedChannel
    public let client: MemoryClient
    public let recorder: Recorder
    /// Below the TLS handler: holds ciphertext while `stuck`, like a peer that stopped reading.
    public let socket: StuckSocket

    /// Moves the virtual clock.
    public func advance(_ amount: TimeAmount) { channel.embeddedEventLoop.advanceTime(by: amount) }

    /// Carries bytes both ways until neither side has anything to say.
    public func pump() throws {
        var moved = true
        while moved {
            moved = false
            _ = client.handshake()
            if let bytes = client.take() {
                try channel.writeInbound(bytes)
                moved = true
            }
            while let bytes = try channel.readOutbound(as: ByteBuffer.self) {
                client.give(bytes)
                moved = true
            }
        }
    }

    /// A TLS handler (default handshake and close timeouts: 10 s and 3 s) on an embedded channel;
    /// `above` goes between it and the recorder.
    public static func start(above: (any ChannelHandler)? = nil) throws -> TLSHandlerHarness {
        let configuration = TLSConfiguration(certificates: [
            .init(certificateChain: TestCertificates.path("localhost.pem"), privateKey: TestCertificates.path("localhost-key.pem"))
        ])
        let context = try TLSContext(configuration: configuration)
        let recorder = Recorder()
        let socket = StuckSocket()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(socket)
        guard let handler = TLSServerHandler(context: context) else { throw HarnessError() }
        try channel.pipeline.syncOperations.addHandler(handler)
        if let above { try channel.pipeline.syncOperations.addHandler(above) }
        try channel.pipeline.syncOperations.addHandler(recorder)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return TLSHandlerHarness(channel: channel, client: MemoryClient(), recorder: recorder, socket: socket)
    }
}
