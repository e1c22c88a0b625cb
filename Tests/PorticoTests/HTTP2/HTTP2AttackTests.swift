import NIOHTTP1
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// Every HTTP/2 attack of 2023–2024 (and the older floods), driven frame by frame against the real
/// gateway on an `h2c` listener: each test shows the attacker cut off (GOAWAY with the error the
/// defence sends, RST_STREAM for a single stream) and the gateway still serving a new connection.
@Suite(.timeLimit(.minutes(2)))
struct HTTP2AttackTests {
    typealias Frames = RawHTTP2Client.FrameType
    typealias Codes = RawHTTP2Client.ErrorCode

    /// The echo service and the given `limits.http2` (and other `limits`).
    static func policy(_ http2: String, limits: String = "") -> ([Int]) -> String {
        { ports in
            """
            limits: { \(limits)\(limits.isEmpty ? "" : ", ")http2: { \(http2) } }
            \(echoServicePolicy(ports))
            """
        }
    }

    /// Runs `body` against a gateway with an h2c listener; then a new client must be served and,
    /// with `refusal`, the metrics must count a connection ended for that reason.
    static func withH2C(
        _ http2: String, limits: String = "", backends: [BackendServer.Handler] = [DemoBackends.echo], refusal: String? = nil,
        _ body: @escaping @Sendable (Int, [BackendServer]) throws -> Void
    ) async throws {
        try await withGateway(backends: backends, listener: "protocols: [h2c]", policy: policy(http2, limits: limits)) {
            gateway, servers in
            let port = gateway.port
            let sendable = servers
            try await offThePool { try body(port, sendable) }
            // Whatever the attacker did, a new client is served.
            try await offThePool { try Self.expectServed(port: port) }
            if let refusal {
                let series = "portico_http2_connections_refused_total{reason=\"\(refusal)\"} "
                let line = gateway.gateway.metrics.render().split(separator: "\n").first { $0.hasPrefix(series) }
                #expect(line.map { $0.dropFirst(series.count) != "0" } == true, "\(refusal): \(line ?? "no series")")
            }
        }
    }

    /// A plain GET on a new connection gets the echo backend's 200.
    static func expectServed(port: Int) throws {
        let client = try RawHTTP2Client(port: port)
        try client.request(stream: 1, path: "/echo/alive")
        let headers = try client.readFrame { $0.type == Frames.headers && $0.stream == 1 }
        #expect(headers != nil, "a new connection is served")
        // ":status: 200" is HPACK's static entry 8, sent indexed.
        #expect(headers?.payload.first == 0x88)
    }

    @Test("rapid reset (CVE-2023-44487): streams opened and reset at once count, and the client gets GOAWAY")
    func rapidReset() async throws {
        try await Self.withH2C("maxResets: 20", refusal: "resets") { port, _ in
            let client = try RawHTTP2Client(port: port)
            var stream: UInt32 = 1
            for _ in 0..<100 {
                // Sent blind, as the attack does; the gateway may close mid-way.
                guard (try? client.request(stream: stream, path: "/echo/reset")) != nil,
                    (try? client.send(type: Frames.rstStream, stream: stream, payload: [0, 0, 0, 8])) != nil
                else { break }
                stream += 2
            }
            let goAway = try client.readGoAway()
            #expect(goAway?.errorCode == Codes.enhanceYourCalm)
            #expect(client.readUntilClosed().closed)
        }
    }

    @Test("CONTINUATION flood (CVE-2024-27316): a header block is cut off once it passes maxHeaderListSize, as it arrives")
    func continuationFlood() async throws {
        try await Self.withH2C("maxHeaderListSize: 4KiB", refusal: "header_block") { port, servers in
            let client = try RawHTTP2Client(port: port)
            let first = RawHTTP2Client.headerBlock(RawHTTP2Client.requestFields(path: "/echo/flood"))
            try client.send(type: Frames.headers, stream: 1, payload: first)
            let filler = RawHTTP2Client.headerBlock([("x-filler", String(repeating: "a", count: 1000))])
            var sent = 0
            // Never END_HEADERS: a server that waited for the block's end would hold it all.
            // 20 MB: more than the loopback socket's buffers hold once the gateway has closed.
            while sent < 20_000, (try? client.send(type: Frames.continuation, stream: 1, payload: filler)) != nil { sent += 1 }
            #expect(sent < 20_000, "the gateway stopped reading long before the flood's end")
            let frames = client.readUntilClosed()
            #expect(frames.closed)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("an HPACK bomb (a small block that decodes past maxHeaderListSize) never reaches a backend")
    func hpackBomb() async throws {
        try await Self.withH2C("maxHeaderListSize: 4KiB, headerTableSize: 4096") { port, servers in
            let client = try RawHTTP2Client(port: port)
            // One 3000-byte value into the dynamic table (literal with incremental indexing), then
            // 200 one-byte references to it: 600 KB decoded from a 3 KB block.
            var block = RawHTTP2Client.headerBlock(RawHTTP2Client.requestFields(path: "/echo/bomb"))
            block += [0x40] + RawHTTP2Client.hpackInteger(5, prefixBits: 7) + Array("x-big".utf8)
            block += RawHTTP2Client.hpackInteger(3000, prefixBits: 7) + [UInt8](repeating: UInt8(ascii: "b"), count: 3000)
            block += [UInt8](repeating: 0x80 | 62, count: 200)
            try client.send(type: Frames.headers, flags: 0x5, stream: 1, payload: block)
            let answer = try client.readFrame {
                $0.type == Frames.goAway || $0.type == Frames.rstStream || ($0.type == Frames.headers && $0.stream == 1)
            }
            #expect(answer != nil)
            if answer?.type == Frames.headers {
                // Answered, then: with 431, never a backend's answer.
                #expect(answer?.payload.first != 0x88)
            }
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("SETTINGS and PING floods get GOAWAY")
    func controlFrameFloods() async throws {
        for type in [Frames.settings, Frames.ping] {
            try await Self.withH2C("maxControlFrames: 50", refusal: "control_frames") { port, _ in
                let client = try RawHTTP2Client(port: port)
                let payload: [UInt8] = type == Frames.ping ? [UInt8](repeating: 1, count: 8) : []
                for _ in 0..<200 {
                    guard (try? client.send(type: type, stream: 0, payload: payload)) != nil else { break }
                }
                let goAway = try client.readGoAway()
                #expect(goAway?.errorCode == Codes.enhanceYourCalm, "type \(type)")
                #expect(client.readUntilClosed().closed)
            }
        }
    }

    @Test("a flood of empty DATA frames gets GOAWAY")
    func emptyDataFlood() async throws {
        try await Self.withH2C("", refusal: "empty_data") { port, servers in
            let client = try RawHTTP2Client(port: port)
            try client.request(stream: 1, method: "POST", path: "/echo/empty", endStream: false)
            for _ in 0..<100 {
                guard (try? client.send(type: Frames.data, stream: 1)) != nil else { break }
            }
            let goAway = try client.readGoAway()
            #expect(goAway?.errorCode == Codes.enhanceYourCalm)
            #expect(client.readUntilClosed().closed)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("a WINDOW_UPDATE flood gets GOAWAY naming the last stream the client opened")
    func windowUpdateFlood() async throws {
        try await Self.withH2C("maxWindowUpdates: 100", refusal: "window_updates") { port, _ in
            let client = try RawHTTP2Client(port: port)
            try client.request(stream: 1, path: "/echo/before")
            for _ in 0..<500 {
                guard (try? client.send(type: Frames.windowUpdate, stream: 0, payload: [0, 0, 0, 1])) != nil else { break }
            }
            let goAway = try client.readGoAway()
            #expect(goAway?.errorCode == Codes.enhanceYourCalm)
            #expect(goAway.map { UInt32(bytes: $0.payload[0..<4]) } == 1)
            #expect(client.readUntilClosed().closed)
        }
    }

    @Test("headers that never end are cut off by headTimeout")
    func headersThatNeverEnd() async throws {
        try await Self.withH2C("", limits: "headTimeout: 300ms", refusal: "header_timeout") { port, servers in
            let client = try RawHTTP2Client(port: port)
            let block = RawHTTP2Client.headerBlock(RawHTTP2Client.requestFields(path: "/echo/slow"))
            try client.send(type: Frames.headers, flags: 0x1, stream: 1, payload: block)  // no END_HEADERS, then nothing
            let goAway = try client.readGoAway()
            #expect(goAway?.errorCode == Codes.enhanceYourCalm)
            #expect(client.readUntilClosed().closed)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("a body that stops coming gets 408 on its stream; a gRPC call's, gRPC's DEADLINE_EXCEEDED in one HEADERS frame")
    func lateBody() async throws {
        for grpc in [false, true] {
            try await Self.withH2C("", limits: "headTimeout: 300ms, minBodyRate: 0") { port, servers in
                let client = try RawHTTP2Client(port: port)
                let fields = grpc ? [("content-type", "application/grpc"), ("te", "trailers")] : [("content-length", "10")]
                try client.request(stream: 1, method: "POST", path: "/echo/late", extra: fields, endStream: false)
                try client.send(type: Frames.data, stream: 1, payload: Array("12345".utf8))  // and then nothing
                let answer = try #require(try client.readFrame { $0.stream == 1 && $0.type == Frames.headers })
                if grpc {
                    // HTTP 200 (HPACK static entry 8) and END_STREAM: Trailers-Only, its status inside.
                    #expect(answer.payload.first == 0x88)
                    #expect(answer.flags & 0x1 != 0)
                } else {
                    // 408 is not in HPACK's static table: a literal, then the body follows.
                    #expect(answer.payload.first != 0x88)
                    #expect(answer.flags & 0x1 == 0)
                }
                #expect(servers[0].requestsReceived == 0)
            }
        }
    }

    @Test("a zero window held forever: the stream is reset after sendTimeout, the connection lives on")
    func zeroWindowHeldForever() async throws {
        let large: BackendServer.Handler = { _ in .stream(status: .ok, headers: HTTPHeaders(), totalBytes: 4 << 20) }
        try await Self.withH2C("", limits: "sendTimeout: 300ms", backends: [large]) { port, _ in
            // SETTINGS_INITIAL_WINDOW_SIZE 0: the gateway may send no DATA at all.
            let client = try RawHTTP2Client(port: port, settings: [(0x4, 0)])
            try client.request(stream: 1, path: "/echo/large")
            let reset = try client.readFrame { $0.type == Frames.rstStream && $0.stream == 1 }
            #expect(reset != nil)
            // The connection itself still answers.
            try client.send(type: Frames.ping, stream: 0, payload: [UInt8](repeating: 7, count: 8))
            let pong = try client.readFrame { $0.type == Frames.ping && $0.flags & 0x1 != 0 }
            #expect(pong?.payload == [UInt8](repeating: 7, count: 8))
        }
    }

    @Test("streams over maxConcurrentStreams are refused with REFUSED_STREAM; a client refused again and again gets GOAWAY")
    func tooManyStreams() async throws {
        try await Self.withH2C("maxConcurrentStreams: 2, maxResets: 5", refusal: "resets") { port, servers in
            let client = try RawHTTP2Client(port: port)
            let settings = try #require(try client.readFrame { $0.type == Frames.settings && $0.flags & 0x1 == 0 })
            // SETTINGS_MAX_CONCURRENT_STREAMS (0x3) as the client is told it.
            let advertised = stride(from: 0, to: settings.payload.count, by: 6).first { settings.payload[$0 + 1] == 0x3 }.map {
                UInt32(bytes: settings.payload[($0 + 2)..<($0 + 6)])
            }
            #expect(advertised == 2)
            try client.send(type: Frames.settings, flags: 0x1, stream: 0)
            // Bodies that never end keep the streams open.
            for stream: UInt32 in [1, 3, 5] {
                try client.request(stream: stream, method: "POST", path: "/echo/open", endStream: false)
            }
            let reset = try client.readFrame { $0.type == Frames.rstStream }
            #expect(reset?.stream == 5)
            #expect(reset?.errorCode == Codes.refusedStream)
            // The two admitted streams are still served: one finishes its body.
            try client.send(type: Frames.data, flags: 0x1, stream: 1, payload: Array("done".utf8))
            let answer = try client.readFrame { $0.type == Frames.headers && $0.stream == 1 }
            #expect(answer?.payload.first == 0x88)
            // Opening streams only to be refused is a flood like any other.
            var stream: UInt32 = 7
            for _ in 0..<20 {
                guard (try? client.request(stream: stream, method: "POST", path: "/echo/more", endStream: false)) != nil else { break }
                stream += 2
            }
            let goAway = try client.readGoAway()
            #expect(goAway?.errorCode == Codes.enhanceYourCalm)
            #expect(client.readUntilClosed().closed)
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test("a stream reset and a new one opened in the same read, at the limit: the new one is admitted, not refused")
    func resetFreesItsPlaceAtOnce() async throws {
        try await Self.withH2C("maxConcurrentStreams: 2") { port, servers in
            let client = try RawHTTP2Client(port: port)
            _ = try client.readFrame { $0.type == Frames.settings && $0.flags & 0x1 == 0 }
            try client.send(type: Frames.settings, flags: 0x1, stream: 0)
            for stream: UInt32 in [1, 3] {
                try client.request(stream: stream, method: "POST", path: "/echo/open", endStream: false)
            }
            // One write: stream 1 reset, stream 5 opened (and finished at once).
            let block = RawHTTP2Client.headerBlock(RawHTTP2Client.requestFields(path: "/echo/after-reset"))
            try client.raw.send(
                RawHTTP2Client.frame(type: Frames.rstStream, stream: 1, payload: [0, 0, 0, 8])
                    + RawHTTP2Client.frame(type: Frames.headers, flags: 0x5, stream: 5, payload: block))
            let answer = try client.readFrame { $0.stream == 5 && ($0.type == Frames.headers || $0.type == Frames.rstStream) }
            #expect(answer?.type == Frames.headers, "\(String(describing: answer)) code \(String(describing: answer?.errorCode))")
            #expect(answer?.payload.first == 0x88)
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test(
        "malformed requests get a stream error and never reach a backend",
        arguments: [
            ("no :path", [(":method", "GET"), (":scheme", "http"), (":authority", "gateway.test")]),
            ("an uppercase name", RawHTTP2Client.requestFields(path: "/echo/a", extra: [("X-Upper", "1")])),
            ("a connection-specific field", RawHTTP2Client.requestFields(path: "/echo/a", extra: [("connection", "keep-alive")])),
            ("transfer-encoding", RawHTTP2Client.requestFields(path: "/echo/a", extra: [("transfer-encoding", "chunked")])),
        ])
    func malformedRequests(_ what: String, _ fields: [(String, String)]) async throws {
        try await Self.withH2C("") { port, servers in
            let client = try RawHTTP2Client(port: port)
            try client.send(type: Frames.headers, flags: 0x5, stream: 1, payload: RawHTTP2Client.headerBlock(fields))
            let reset = try client.readFrame { $0.stream == 1 && ($0.type == Frames.rstStream || $0.type == Frames.headers) }
            #expect(reset?.type == Frames.rstStream, "\(what)")
            #expect(reset?.errorCode == Codes.protocolError, "\(what)")
            #expect(servers[0].requestsReceived == 0, "\(what)")
        }
    }

    @Test("a content-length the DATA does not match is a stream error, and the body never reaches a backend")
    func contentLengthMismatch() async throws {
        try await Self.withH2C("") { port, servers in
            let client = try RawHTTP2Client(port: port)
            try client.request(stream: 1, method: "POST", path: "/echo/cl", extra: [("content-length", "10")], endStream: false)
            try client.send(type: Frames.data, flags: 0x1, stream: 1, payload: Array("12345".utf8))
            let reset = try client.readFrame { $0.stream == 1 && ($0.type == Frames.rstStream || $0.type == Frames.headers) }
            #expect(reset?.type == Frames.rstStream)
            #expect(reset?.errorCode == Codes.protocolError)
            #expect(servers[0].requestsReceived == 0)
        }
    }
}
