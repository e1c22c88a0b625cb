import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import PorticoPolicy
import Synchronization

// The connection pipeline and `GatewayServices` are internal to the server, the response decoder
// to the upstream client; see Package.swift.
@testable import Portico
@testable import PorticoUpstream

/// What every input shares: one compiled policy (built once, like a gateway's snapshot) and the
/// upstream double. Per input, the connection gets fresh rate-limit and nonce state, so that an
/// input's outcome does not depend on the inputs before it.
public final class GatewayHarness: Sendable {
    public static let shared = GatewayHarness()

    let snapshot: PolicySnapshot
    let store: PolicyStore
    let upstream = ImmediateUpstreamClient()
    let logger = Logger(label: "portico.fuzz") { _ in SwiftLogNoOpLogHandler() }
    let clientAddress = try! SocketAddress(ipAddress: "192.0.2.7", port: 40000)

    private init() {
        do {
            snapshot = try PolicyLoader().load(sources: [(file: "fuzz-gateway.yaml", text: Self.policy)])
        } catch {
            preconditionFailure("the fuzz target's policy does not load: \(error)")
        }
        store = PolicyStore(snapshot)
    }

    /// Builds the gateway's pipeline on `channel` (as the listener does, without TLS) and opens it:
    /// HTTP/1.1's, or with `http2` the one an h2c connection gets.
    public func configure(_ channel: EmbeddedChannel, http2: Bool = false) throws {
        channel.remoteAddress = clientAddress
        let services = GatewayServices(
            store: store, upstream: upstream, nonces: InMemoryNonceStore(capacity: 16, shardCount: 1),
            rateLimiter: RateLimiter(store: InMemoryRateLimitStore(capacity: 64, shardCount: 1)), accessLogger: logger,
            scheme: "http")
        let pipeline = ConnectionPipeline(services: services, limits: snapshot.limits)
        if http2 {
            try HTTP2Pipeline(pipeline).configure(channel, client: ClientConnection())
        } else {
            try pipeline.configure(channel.pipeline.syncOperations)
        }
        try channel.connect(to: clientAddress).wait()
    }

    /// Sends `input` through a fresh connection (HTTP/1.1's pipeline, or HTTP/2's with `http2`),
    /// lets the backend double answer, closes the connection, and returns all the gateway wrote.
    /// Errors reaching the end of the pipeline are the handlers' business (they close the channel).
    public func exchange(_ input: ByteBuffer, http2: Bool = false) -> ByteBuffer {
        upstream.cutAnswers.store(0, ordering: .relaxed)
        let channel = EmbeddedChannel()
        do {
            try configure(channel, http2: http2)
        } catch {
            preconditionFailure("the gateway's pipeline cannot be built: \(error)")
        }
        var output = channel.allocator.buffer(capacity: 512)
        _ = try? channel.writeInbound(input)
        // The upstream double answers in tasks on the channel's event loop; each answer may let a
        // further request through, which asks upstream again.
        for _ in 0..<64 where channel.isActive {
            channel.embeddedEventLoop.run()
            if !Self.drainOutbound(channel, into: &output) { break }
        }
        _ = try? channel.finish(acceptAlreadyClosed: true)
        _ = Self.drainOutbound(channel, into: &output)
        return output
    }

    /// Moves what the gateway wrote into `output`; false when there was nothing.
    public static func drainOutbound(_ channel: EmbeddedChannel, into output: inout ByteBuffer) -> Bool {
        var any = false
        while let data = try? channel.readOutbound(as: IOData.self) {
            any = true
            switch data {
            case .byteBuffer(var buffer): output.writeBuffer(&buffer)
            case .fileRegion: preconditionFailure("the gateway wrote a file region")
            }
        }
        return any
    }

    /// The gateway's output for `input` (just sent through ``exchange(_:http2:)``) is responses,
    /// nothing else, framed as a client reads them. It starts with a status line, and it reads with
    /// Portico's own response decoder as one whole response per request, in order (a refusal of
    /// bytes that make no request last), each read as an answer to its request's method:
    /// - no response to an HTTP/1.0 request is chunked (RFC 9112 §6.1);
    /// - nothing follows a response that says `Connection: close`;
    /// - the output ends between responses, unless the backend double cut an answer short.
    public func checkResponses(_ output: ByteBuffer, input: ByteBuffer) {
        guard output.readableBytes > 0 else { return }
        let start = output.getString(at: output.readerIndex, length: min(9, output.readableBytes)) ?? ""
        precondition(start == "HTTP/1.1 " || start == "HTTP/1.0 ", "the gateway wrote something that is not a response: \(start)")
        let requests = Self.requestHeads(in: input, limits: snapshot.limits)
        var decoder = HTTP1ResponseDecoder()
        decoder.receive(output)
        var responses = 0
        // The response being read says `Connection: close`; one that did has ended.
        var closing = false
        var closed = false
        reading: while true {
            let request = responses < requests.count ? requests[responses] : nil
            decoder.expectResponse(toHEAD: request?.method == .HEAD || request?.method == .CONNECT)
            while true {
                let part: HTTP1ResponseDecoder.Part?
                do {
                    part = try decoder.next()
                } catch {
                    preconditionFailure("response \(responses + 1) of the gateway's does not read: \(error.detail)")
                }
                guard let part else { break reading }
                precondition(!closed, "the gateway wrote after a response that closes the connection")
                switch part {
                case .head(let head, let framing, _):
                    if request?.version == .http1_0 {
                        precondition(framing.body != .transferCoded, "a chunked response to an HTTP/1.0 request")
                    }
                    closing = head.headers["connection"].contains { $0.lowercased() == "close" }
                case .end:
                    responses += 1
                    closed = closing
                    continue reading
                case .interim, .body:
                    break
                }
            }
        }
        let ending = decoder.endOfInput()
        precondition(
            ending != .truncated || upstream.cutAnswers.load(ordering: .relaxed) > 0,
            "the gateway's output ends inside response \(responses + 1)")
    }

    /// The methods and versions of the requests in `input`, read as the gateway reads them (its
    /// request decoder, with the policy's limits), up to the first bytes it refuses.
    static func requestHeads(in input: ByteBuffer, limits: LimitsPolicy) -> [(method: HTTPMethod, version: HTTPVersion)] {
        var decoder = ConnectionPipeline.requestDecoder(limits)
        decoder.receive(input)
        var heads: [(method: HTTPMethod, version: HTTPVersion)] = []
        while case .some(let part) = try? decoder.next() {
            if case .head(let head) = part { heads.append((head.method, head.version)) }
        }
        return heads
    }

    /// Every kind of service: unauthenticated with an address limit, signed (the demo key's secret
    /// is inline, and the clock skew allowed is ten years so that the signed seeds in the corpus
    /// stay valid), key-only on a host. The backend URLs are never dialled.
    static let policy = """
        listeners:
          - { name: fuzz, address: 127.0.0.1, port: 0 }
        limits: { maxBodyBytes: 2048, maxHeadBytes: 4096, maxHeaderCount: 32, headTimeout: 10s, idleTimeout: 60s }
        accessLog: { enabled: true }
        signatures:
          maxClockSkew: 87600h
          requireNonce: true
          requiredComponents: ["@method", "@authority", "@path"]
        apiKeys: { header: X-API-Key }
        backends:
          echo: { url: "http://127.0.0.1:9/echo-backend", maxConcurrent: 2 }
          quotes: { url: "http://127.0.0.1:9", rateLimit: { rate: 1000/s, burst: 1000 } }
          keyed: { url: "http://127.0.0.1:9/keyed-backend" }
        services:
          echo:
            path: /echo
            allowEncodedSlashes: true
            addressRateLimit: { rate: 1000/s, burst: 1000 }
            versions:
              1: { proxy: { backend: echo, rewrite: / } }
          stockQuote:
            path: /api/{version}/stockquote
            auth: signature
            versions:
              1: { proxy: { backend: quotes, rewrite: /v1/quotes } }
              2: { proxy: { backend: quotes } }
          keyed:
            path: /keyed
            host: api.example.com
            auth: apiKey
            versions:
              1: { proxy: { backend: keyed } }
        keys:
          demo-app:
            secret: demo-only-secret-published-in-the-portico-repository
            demo: true
            services: [stockQuote, keyed]
            tier: standard
        tiers:
          standard: { rate: 1000/s, burst: 1000 }
        """
}

extension GatewayHarness {
    /// The client connection preface (RFC 9113 §3.4) an HTTP/2 input is sent after.
    public static let preface = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

    /// The gateway's HTTP/2 output is whole frames, nothing else: it starts with its SETTINGS, and
    /// each frame's 9-byte header announces exactly the payload that follows it.
    public static func checkFrames(_ output: ByteBuffer) {
        var rest = output
        var first = true
        while rest.readableBytes > 0 {
            guard let header = rest.readBytes(length: 9) else {
                preconditionFailure("the gateway wrote \(rest.readableBytes) bytes that are not a frame header")
            }
            let length = Int(header[0]) << 16 | Int(header[1]) << 8 | Int(header[2])
            precondition(!first || header[3] == 0x4, "the gateway's first frame is not SETTINGS but type \(header[3])")
            precondition(length <= 16_384, "the gateway wrote a \(length)-byte frame, over the default SETTINGS_MAX_FRAME_SIZE")
            precondition(rest.readableBytes >= length, "a frame announces \(length) bytes and \(rest.readableBytes) follow")
            rest.moveReaderIndex(forwardBy: length)
            first = false
        }
    }
}
