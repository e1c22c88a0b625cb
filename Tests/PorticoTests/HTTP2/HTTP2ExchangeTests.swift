import Foundation
import Logging
import NIOHTTP1
import Portico
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

/// Requests over HTTP/2 through the real gateway, from curl (its HTTP/2 is nghttp2's): ALPN on a
/// TLS listener, prior knowledge on a plain one, and each stream carried through the same stages
/// and handlers as an HTTP/1.1 request.
@Suite(.timeLimit(.minutes(2)))
struct HTTP2ExchangeTests {
    struct CurlAnswer {
        var status: Int
        var httpVersion: String
        var body: String
        var headers: [String: String]
        var downloaded: Int
    }

    struct CurlFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs the curl command (with `arguments` before the URL) and reads what it reports.
    static func curl(_ arguments: [String], _ url: String) throws -> CurlAnswer {
        let headerFile = FileManager.default.temporaryDirectory.appendingPathComponent("h2-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: headerFile) }
        let result = try ChildProcess.run(
            "/usr/bin/curl",
            ["-sS", "--max-time", "20", "--noproxy", "*", "-D", headerFile, "-w", "\n%{http_code} %{http_version} %{size_download}"]
                + arguments + [url])
        let output = String(decoding: result.output, as: UTF8.self)
        guard result.termination == .exited(0), let split = output.lastIndex(of: "\n") else {
            throw CurlFailed(description: "curl \(result.termination): \(String(decoding: result.errors, as: UTF8.self))")
        }
        let summary = output[output.index(after: split)...].split(separator: " ")
        var headers: [String: String] = [:]
        for line in (try? String(contentsOfFile: headerFile, encoding: .utf8))?.split(separator: "\r\n") ?? [] {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return CurlAnswer(
            status: Int(summary[0]) ?? 0, httpVersion: String(summary[1]), body: String(output[..<split]), headers: headers,
            downloaded: Int(summary[2]) ?? 0)
    }

    @Test("a TLS listener offers h2 through ALPN: curl --http2 gets HTTP/2, the access log says so, HTTP/1.1 clients still get 1.1")
    func alpn() async throws {
        let recorder = RecordingLogHandler()
        try await withGateway(
            tls: TestCertificates.listenerTLS(), logger: Logger(label: "test") { _ in recorder }, policy: echoServicePolicy
        ) { gateway, _ in
            let port = gateway.port
            let url = "https://localhost:\(port)/echo/over-h2"
            let resolve = ["--cacert", TestCertificates.path("ca.pem"), "--resolve", "localhost:\(port):127.0.0.1"]
            let h2 = try await offThePool { try Self.curl(resolve + ["--http2"], url) }
            #expect(h2.status == 200)
            #expect(h2.httpVersion == "2")
            #expect(h2.body.contains("\"path\":\"\\/echo\\/over-h2\""))
            #expect(h2.headers["x-request-id"] != nil)
            let h1 = try await offThePool { try Self.curl(resolve + ["--http1.1"], url) }
            #expect(h1.httpVersion == "1.1")
            #expect(h1.status == 200)
            let access = { recorder.records.filter { $0.message == "access" && $0.metadata["path"]?.description == "/echo/over-h2" } }
            #expect(await eventually { access().count == 2 })
            let protocols = Set(access().compactMap { $0.metadata["protocol"]?.description })
            #expect(protocols == ["HTTP/2", "HTTP/1.1"])
        }
    }

    @Test("a TLS listener with protocols: [http/1.1] does not offer h2")
    func http1Only() async throws {
        try await withGateway(tls: TestCertificates.listenerTLS(), listener: "protocols: [http/1.1]", policy: echoServicePolicy) {
            gateway, _ in
            let port = gateway.port
            let resolve = ["--cacert", TestCertificates.path("ca.pem"), "--resolve", "localhost:\(port):127.0.0.1", "--http2"]
            let answer = try await offThePool { try Self.curl(resolve, "https://localhost:\(port)/echo/a") }
            #expect(answer.httpVersion == "1.1")
            #expect(answer.status == 200)
        }
    }

    @Test("a plain listener with [http/1.1, h2c] tells prior-knowledge HTTP/2 from HTTP/1.1 by the preface")
    func h2cBesideHTTP1() async throws {
        try await withGateway(listener: "protocols: [http/1.1, h2c]", policy: echoServicePolicy) { gateway, _ in
            let url = "http://127.0.0.1:\(gateway.port)/echo/both"
            let h2 = try await offThePool { try Self.curl(["--http2-prior-knowledge"], url) }
            #expect(h2.httpVersion == "2")
            #expect(h2.status == 200)
            let h1 = try await offThePool { try Self.curl([], url) }
            #expect(h1.httpVersion == "1.1")
            #expect(h1.status == 200)
        }
    }

    @Test("a signed request means the same over HTTP/2 (@authority from :authority); a forged one gets 401 problem+json")
    func signedAndRefused() async throws {
        try await withGateway(listener: "protocols: [h2c]", policy: SignedServicesFixture.policy) { gateway, servers in
            let signer = TestSigner(keyID: "app-one", secret: SignedServicesFixture.appSecret)
            let url = "http://127.0.0.1:\(gateway.port)/signed/h2?x=1"
            let body = #"{"over":"h2"}"#
            let fields = try signer.headers("POST", "/signed/h2?x=1", body: body)
            let headerArguments = (fields + [("Host", "gateway.test")]).flatMap { ["-H", "\($0.0): \($0.1)"] }
            let signed = try await offThePool {
                try Self.curl(["--http2-prior-knowledge", "--data-binary", body] + headerArguments, url)
            }
            #expect(signed.httpVersion == "2")
            #expect(signed.status == 200)
            #expect(signed.body.contains(#"\"over\":\"h2\""#))
            // The same fields on another body: the digest no longer matches.
            let forged = try await offThePool {
                try Self.curl(["--http2-prior-knowledge", "--data-binary", #"{"over":"h1"}"#] + headerArguments, url)
            }
            #expect(forged.status == 401 || forged.status == 400)
            #expect(forged.headers["content-type"] == "application/problem+json")
            #expect(servers[0].requestsReceived == 1)
        }
    }

    @Test("rate limits answer 429 with RateLimit fields over HTTP/2")
    func rateLimited() async throws {
        let policy: ([Int]) -> String = { ports in
            """
            backends:
              echo: { url: "http://127.0.0.1:\(ports[0])", rateLimit: { rate: 1/m, burst: 2 } }
            services:
              echo: { path: /echo, versions: { 1: { proxy: { backend: echo } } } }
            """
        }
        try await withGateway(listener: "protocols: [h2c]", policy: policy) { gateway, servers in
            let url = "http://127.0.0.1:\(gateway.port)/echo/limited"
            var answers: [CurlAnswer] = []
            for _ in 0..<3 { answers.append(try await offThePool { try Self.curl(["--http2-prior-knowledge"], url) }) }
            #expect(answers.map(\.status) == [200, 200, 429])
            #expect(answers.allSatisfy { $0.httpVersion == "2" })
            #expect(answers[2].headers["ratelimit"] != nil)
            #expect(answers[2].headers["retry-after"] != nil)
            #expect(answers[2].headers["content-type"] == "application/problem+json")
            #expect(servers[0].requestsReceived == 2)
        }
    }

    @Test("a large response streams under HTTP/2 flow control, whole")
    func largeResponse() async throws {
        let size = 8 << 20
        let large: BackendServer.Handler = { _ in .stream(status: .ok, headers: HTTPHeaders(), totalBytes: size) }
        try await withGateway(backends: [large], listener: "protocols: [h2c]", policy: echoServicePolicy) { gateway, _ in
            let url = "http://127.0.0.1:\(gateway.port)/echo/large"
            let answer = try await offThePool {
                try Self.curl(["--http2-prior-knowledge", "-o", "/dev/null"], url)
            }
            #expect(answer.status == 200)
            #expect(answer.httpVersion == "2")
            #expect(answer.downloaded == size)
        }
    }

    @Test("facades answer their contracts over HTTP/2, from their JSON, XML and CSV sources")
    func facades() async throws {
        try await withGateway(backends: DemoFacadeTests.feeds, listener: "protocols: [h2c]", policy: { DemoFacadeTests.policy($0) }) {
            gateway, _ in
            for (path, body) in DemoFacadeTests.expected.prefix(4) {
                let answer = try await offThePool { try Self.curl(["--http2-prior-knowledge"], "http://127.0.0.1:\(gateway.port)\(path)") }
                #expect(answer.httpVersion == "2", "\(path)")
                #expect(answer.status == 200, "\(path)")
                #expect(answer.body == body, "\(path)")
            }
        }
    }

    @Test("the service locator is the same document over HTTP/2, and a matching If-None-Match gets 304 as one HEADERS frame")
    func locator() async throws {
        try await withGateway(listener: "protocols: [h2c]", policy: LocatorTests.policy()) { gateway, servers in
            let url = "http://127.0.0.1:\(gateway.port)/serviceLocator.json"
            let answer = try await offThePool { try Self.curl(["--http2-prior-knowledge"], url) }
            #expect(answer.httpVersion == "2")
            #expect(answer.body == LocatorTests.expectedDocument)
            #expect(answer.headers["cache-control"] == "public, max-age=120")
            let etag = try #require(answer.headers["etag"])
            let port = gateway.port
            let frames = try await offThePool { () -> [RawHTTP2Client.Frame] in
                let client = try RawHTTP2Client(port: port)
                try client.request(stream: 1, path: "/serviceLocator.json", extra: [("if-none-match", etag)])
                var frames: [RawHTTP2Client.Frame] = []
                while let frame = try client.readFrame(), frames.count < 20 {
                    if frame.stream == 1 { frames.append(frame) }
                    if frame.stream == 1 && frame.flags & 0x1 != 0 { break }
                }
                return frames
            }
            // 304 (HPACK static entry 11), with END_STREAM on the HEADERS frame itself.
            #expect(frames.count == 1)
            #expect(frames.first?.payload.first == 0x8B)
            #expect(frames.first.map { $0.type == RawHTTP2Client.FrameType.headers && $0.flags & 0x1 != 0 } == true)
            #expect(servers[0].requestsReceived == 0)
        }
    }

    @Test("a reload while a stream is in flight: the stream finishes on its policy, the next one reads the new")
    func reloadInFlight() async throws {
        let held = try await HeldBackend.start(body: #"{"held":true}"#)
        let policy = { (path: String) in
            """
            backends:
              held: { url: "http://127.0.0.1:\(held.port)" }
            services:
              held: { path: \(path), versions: { 1: { proxy: { backend: held } } } }
            """
        }
        let gateway = try await TestGateway.start(policy: policy("/held"), listener: "protocols: [h2c]")
        let port = gateway.port
        let client = try await offThePool { () -> RawHTTP2Client in
            let client = try RawHTTP2Client(port: port)
            try client.request(stream: 1, path: "/held/a")
            return client
        }
        #expect(await eventually { held.requestsReceived == 1 })
        // The new policy moves the service: what is in flight is not touched.
        try gateway.reload(policy: policy("/moved"))
        held.release()
        let frames = try await offThePool { () -> [RawHTTP2Client.Frame] in
            var frames: [RawHTTP2Client.Frame] = []
            while let frame = try client.readFrame() {
                if frame.stream == 1 { frames.append(frame) }
                if frame.stream == 1 && (frame.flags & 0x1 != 0 || frame.type == RawHTTP2Client.FrameType.rstStream) { break }
            }
            return frames
        }
        #expect(frames.first?.type == RawHTTP2Client.FrameType.headers)
        #expect(frames.first?.payload.first == 0x88)
        #expect(!frames.contains { $0.type == RawHTTP2Client.FrameType.rstStream })
        // The same connection carries the next request, under the new policy: /held is gone (404,
        // HPACK static entry 13), /moved answers.
        let next = try await offThePool { () -> [RawHTTP2Client.Frame?] in
            try client.request(stream: 3, path: "/held/b")
            let gone = try client.readFrame { $0.stream == 3 && $0.type == RawHTTP2Client.FrameType.headers }
            try client.request(stream: 5, path: "/moved/c")
            return [gone]
        }
        #expect(next[0]?.payload.first == 0x8D)
        #expect(await eventually { held.requestsReceived == 2 })
        held.release()
        await gateway.shutdown()
        try await held.shutdown()
    }

    @Test("nghttp and h2load get HTTP/2 from a TLS listener through ALPN")
    func nghttp2Clients() async throws {
        try await withGateway(tls: TestCertificates.listenerTLS(), policy: echoServicePolicy) { gateway, _ in
            let url = "https://localhost:\(gateway.port)/echo/nghttp"
            let nghttp = try await offThePool { try ChildProcess.run("/usr/bin/nghttp", ["-v", url]) }
            let verbose = String(decoding: nghttp.output, as: UTF8.self)
            #expect(nghttp.termination == .exited(0), "\(String(decoding: nghttp.errors, as: UTF8.self))")
            #expect(verbose.contains("The negotiated protocol: h2"))
            #expect(verbose.contains(":status: 200"))
            let h2load = try await offThePool { try ChildProcess.run("/usr/bin/h2load", ["-n", "40", "-c", "2", "-m", "4", url]) }
            let report = String(decoding: h2load.output, as: UTF8.self)
            #expect(report.contains("Application protocol: h2"))
            #expect(report.contains("40 succeeded"), "\(report)")
        }
    }

    @Test("draining: GOAWAY, the stream in flight finishes, then the connection closes")
    func gracefulShutdown() async throws {
        let held = try await HeldBackend.start(body: #"{"held":true}"#)
        let gateway = try await TestGateway.start(
            policy: """
                backends:
                  held: { url: "http://127.0.0.1:\(held.port)" }
                services:
                  held: { path: /held, versions: { 1: { proxy: { backend: held } } } }
                """, listener: "protocols: [h2c]")
        let port = gateway.port
        // Reads wait up to 90 s: the shutdown task may start late on a loaded machine.
        let client = try await offThePool { () -> RawHTTP2Client in
            let client = try RawHTTP2Client(port: port, receiveTimeout: 90)
            try client.request(stream: 1, path: "/held/x")
            return client
        }
        #expect(await eventually { held.requestsReceived == 1 })
        // The grace period only bounds a failure: the stream ends when the test releases it. It
        // once ran out (30 s) on a loaded machine while this task waited for a cooperative
        // thread between the two reads below, so the connection closed before the second GOAWAY:
        // both reads now happen on one thread, without a hop between them.
        let shutdown = Task { await gateway.gateway.shutdown(gracePeriod: .seconds(120)) }
        let (first, second) = try await offThePool { () -> (RawHTTP2Client.Frame?, RawHTTP2Client.Frame?) in
            let first = try client.readGoAway()
            // After the PING's acknowledgement (readFrame answers it), the GOAWAY names stream 1.
            return (first, try client.readGoAway())
        }
        #expect(first?.errorCode == RawHTTP2Client.ErrorCode.noError)
        #expect(second.map { UInt32(bytes: $0.payload[0..<4]) } == 1)
        held.release()
        let (frames, closed) = try await offThePool { client.readUntilClosed() }
        #expect(frames.contains { $0.type == RawHTTP2Client.FrameType.headers && $0.stream == 1 && $0.payload.first == 0x88 })
        #expect(frames.contains { $0.type == RawHTTP2Client.FrameType.data && $0.stream == 1 && $0.flags & 0x1 != 0 })
        #expect(!frames.contains { $0.type == RawHTTP2Client.FrameType.rstStream })
        #expect(closed)
        await shutdown.value
        try await held.shutdown()
    }
}
