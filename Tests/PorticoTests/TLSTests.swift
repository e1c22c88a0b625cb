import CPorticoCurl
import CPorticoOpenSSL
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PorticoDemoBackends
import PorticoPolicy
import PorticoTestSupport
import PorticoTesting
import PorticoUpstream
import Testing

@testable import Portico

@Suite("TLS termination with the system OpenSSL")
struct TLSTests {
    static let localhost = TestCertificates.listenerTLS("localhost")

    /// Two certificates on one listener: localhost (the default) and other.test.
    static var twoCertificates: String {
        """
        { certificates: [
            { certificate: "\(TestCertificates.path("localhost.pem"))", privateKey: "\(TestCertificates.path("localhost-key.pem"))" },
            { certificate: "\(TestCertificates.path("other.pem"))", privateKey: "\(TestCertificates.path("other-key.pem"))" } ] }
        """.replacingOccurrences(of: "\n", with: " ")
    }

    @Test("libcurl over TLS 1.3 and TLS 1.2: handshakes, keep-alive requests, the version in the access log")
    func libcurlVersions() async throws {
        let recorder = RecordingLogHandler()
        try await withGateway(tls: Self.localhost, logger: Logger(label: "test") { _ in recorder }, policy: echoServicePolicy) {
            gateway, _ in
            let versions: [(Int, String)] = [
                (CURL_SSLVERSION_TLSv1_3, "TLSv1.3"),
                (CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2, "TLSv1.2"),
            ]
            for (version, _) in versions {
                let client = CurlTestClient(tlsVersion: version)
                for index in 0..<3 {
                    let response = try client.get("https://localhost:\(gateway.port)/echo/\(index)")
                    #expect(response.status == 200)
                    #expect(response.body.contains("\"path\":\"\\/echo\\/\(index)\""))
                    #expect(client.connectionsOpened == (index == 0 ? 1 : 0))  // keep-alive across requests
                }
            }
        }
        let tls = recorder.records.filter { $0.message == "access" }.compactMap { $0.metadata["tls"]?.description }
        #expect(tls == ["TLSv1.3", "TLSv1.3", "TLSv1.3", "TLSv1.2", "TLSv1.2", "TLSv1.2"])
    }

    @Test("openssl s_client completes a TLS 1.3 handshake, verifies the chain and gets an answer")
    func opensslClient() async throws {
        try await withGateway(tls: Self.localhost, policy: echoServicePolicy) { gateway, _ in
            for flag in ["-tls1_3", "-tls1_2"] {
                // -quiet: s_client keeps reading the connection after its input ends.
                let result = try ChildProcess.run(
                    "/usr/bin/env",
                    [
                        "openssl", "s_client", "-connect", "127.0.0.1:\(gateway.port)", flag, "-servername", "localhost",
                        "-CAfile", TestCertificates.path("ca.pem"), "-alpn", "http/1.1", "-quiet", "-verify_return_error",
                    ],
                    input: Data("GET /echo/s_client HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8))
                let answer = String(decoding: result.output, as: UTF8.self)
                #expect(answer.hasPrefix("HTTP/1.1 200 OK"), "\(flag): \(answer.prefix(200))")
            }
        }
    }

    @Test("a client that offers only TLS 1.1 is refused with a protocol_version alert, and others are still served")
    func tls11Refused() async throws {
        try await withGateway(tls: Self.localhost, policy: echoServicePolicy) { gateway, _ in
            var options = TLSTestClient.Options()
            options.minVersion = 11
            options.maxVersion = 11
            #expect {
                _ = try TLSTestClient(port: gateway.port, options: options)
            } throws: { error in
                "\(error)".contains("protocol version")
            }
            let client = try TLSTestClient(port: gateway.port)
            #expect(client.version == "TLSv1.3")
            #expect(client.applicationProtocol == "http/1.1")
            #expect(try client.request("GET", "/echo/after").status == 200)
        }
    }

    @Test("SNI picks the certificate valid for the name; an unknown or absent name gets the default")
    func sni() async throws {
        try await withGateway(tls: Self.twoCertificates, policy: echoServicePolicy) { gateway, _ throws in
            let port = gateway.port
            #expect(try Self.subject(port: port, name: "other.test", verify: true) == "CN=other.test")
            #expect(try Self.subject(port: port, name: "localhost", verify: true) == "CN=localhost")
            #expect(try Self.subject(port: port, name: "unknown.test", verify: false) == "CN=localhost")
            #expect(try Self.subject(port: port, name: nil, verify: false) == "CN=localhost")
            // And from libcurl, verifying the name it asked for.
            let curl = CurlTestClient(tlsVersion: CURL_SSLVERSION_TLSv1_2, resolve: ["other.test:\(gateway.port):127.0.0.1"])
            #expect(try curl.get("https://other.test:\(gateway.port)/echo/x").status == 200)
        }
    }

    @Test("a request whose Host selects another certificate than its connection's SNI gets 421; one that selects the same passes")
    func misdirected() async throws {
        try await withGateway(tls: Self.twoCertificates, policy: echoServicePolicy) { gateway, servers throws in
            var options = TLSTestClient.Options()
            options.caFile = nil
            // (SNI, Host, status): Host is compared by the certificate it would select, port ignored.
            let cases: [(String?, String, Int)] = [
                ("other.test", "localhost", 421), ("localhost", "other.test", 421), (nil, "other.test", 421),
                ("other.test", "other.test:8443", 200), ("other.test", "OTHER.test", 200), ("localhost", "localhost:443", 200),
                ("unknown.test", "localhost", 200), (nil, "127.0.0.1", 200), ("unknown.test", "elsewhere.test", 200),
            ]
            for (sni, host, status) in cases {
                options.serverName = sni
                let client = try TLSTestClient(port: gateway.port, options: options)
                let response = try client.request("GET", "/echo/x", host: host)
                #expect(response.status == status, "SNI \(sni ?? "none"), Host \(host)")
                if status == 421 {
                    #expect(response.json?["type"] as? String == "urn:portico:problem:misdirected-request")
                }
            }
            #expect(servers[0].requestsReceived == 6)
        }
    }

    /// The subject of the certificate the gateway presents for an SNI name (after a request succeeds).
    static func subject(port: Int, name: String?, verify: Bool) throws -> String? {
        var options = TLSTestClient.Options()
        options.serverName = name
        if !verify { options.caFile = nil }
        let client = try TLSTestClient(port: port, options: options)
        #expect(try client.request("GET", "/echo/sni").status == 200)
        return client.serverSubject
    }

    @Test("mTLS: no certificate or one from another CA fails the handshake; a good one passes and its subject is logged")
    func mutualTLS() async throws {
        let tls = TestCertificates.listenerTLS(
            "localhost", extra: ", clientCertificates: required, clientCA: \"\(TestCertificates.path("client-ca.pem"))\"")
        let recorder = RecordingLogHandler()
        try await withGateway(tls: tls, logger: Logger(label: "test") { _ in recorder }, policy: echoServicePolicy) { gateway, _ throws in
            // TLS 1.3 clients learn of the refusal on their first read, TLS 1.2 clients in the handshake.
            func refused(_ certificate: (chain: String, key: String)?, maxVersion: Int32) -> Bool {
                var options = TLSTestClient.Options()
                options.certificate = certificate
                options.maxVersion = maxVersion
                guard let client = try? TLSTestClient(port: gateway.port, options: options) else { return true }
                return (try? client.request("GET", "/echo/mtls")) == nil
            }
            let foreign = (TestCertificates.path("foreign-client.pem"), TestCertificates.path("foreign-client-key.pem"))
            let good = (TestCertificates.path("client.pem"), TestCertificates.path("client-key.pem"))
            for version: Int32 in [12, 13] {
                #expect(refused(nil, maxVersion: version))
                #expect(refused(foreign, maxVersion: version))
                #expect(!refused(good, maxVersion: version))
            }
            let curl = CurlTestClient(tlsVersion: CURL_SSLVERSION_TLSv1_3)
            curl.useClientCertificate(chain: good.0, key: good.1)
            #expect(try curl.get("https://localhost:\(gateway.port)/echo/curl").status == 200)
        }
        let subjects = recorder.records.filter { $0.message == "access" }.compactMap { $0.metadata["client_cert"]?.description }
        #expect(subjects.count == 3)
        #expect(subjects.allSatisfy { $0 == "CN=app-client,O=Portico tests" })
    }

    @Test("sessions resume on a second connection")
    func resumption() async throws {
        try await withGateway(tls: Self.localhost, policy: echoServicePolicy) { gateway, _ in
            for version: Int32 in [12, 13] {
                var options = TLSTestClient.Options()
                options.maxVersion = version
                let first = try TLSTestClient(port: gateway.port, options: options)
                #expect(try first.request("GET", "/echo/1").status == 200)  // TLS 1.3 tickets arrive after the handshake
                #expect(!first.resumed)
                let session = try #require(first.session())
                defer { SSL_SESSION_free(session) }
                options.session = session
                let second = try TLSTestClient(port: gateway.port, options: options)
                #expect(second.resumed, "TLS 1.\(version - 10) session not resumed")
                #expect(try second.request("GET", "/echo/2").status == 200)
            }
        }
    }

    /// A real ClientHello, made by an OpenSSL client over memory BIOs.
    static func clientHello() -> [UInt8] {
        let context = portico_tls_client_context_new(0, 0)!
        defer { SSL_CTX_free(context) }
        let ssl = SSL_new(context)!
        defer { SSL_free(ssl) }
        let input = portico_tls_memory_bio()!
        let output = portico_tls_memory_bio()!
        SSL_set_bio(ssl, input, output)
        _ = portico_tls_set_host_name(ssl, "localhost")
        SSL_set_connect_state(ssl)
        _ = SSL_do_handshake(ssl)
        var bytes = [UInt8](repeating: 0, count: Int(BIO_ctrl_pending(output)))
        _ = BIO_read(output, &bytes, Int32(bytes.count))
        return bytes
    }

    @Test("half a ClientHello, random bytes, a silent client, mutated hellos, plain HTTP: all closed, a new hello still answered")
    func robustness() async throws {
        // A short handshake timeout, for the clients that wait on it. No client here has to finish a
        // handshake within it (on a loaded machine one might not): the last check only needs the
        // gateway's answer to a ClientHello.
        let tls = TestCertificates.listenerTLS("localhost", extra: ", handshakeTimeout: 1s")
        try await withGateway(tls: tls, policy: echoServicePolicy) { gateway, _ in
            let hello = Self.clientHello()
            #expect(hello.count > 100 && hello[0] == 0x16)  // a handshake record

            // Closed by the handshake timeout (when exactly: TLSServerHandlerTests, on a virtual clock).
            let half = try gateway.connect(receiveTimeout: 30)
            try half.send(Array(hello.prefix(hello.count / 2)))
            let silent = try gateway.connect(receiveTimeout: 30)
            let halfClosed = try await offThePool { half.waitForClose() }
            #expect(halfClosed)
            let silentClosed = try await offThePool { silent.waitForClose() }
            #expect(silentClosed)

            var generator = SystemRandomNumberGenerator()
            for _ in 0..<20 {
                let garbage = try gateway.connect(receiveTimeout: 30)
                try garbage.send((0..<512).map { _ in UInt8.random(in: 0...255, using: &generator) })
                let garbageClosed = try await offThePool { garbage.waitForClose() }
                #expect(garbageClosed)
            }
            // ClientHellos with a few bytes changed reach deeper into OpenSSL's parser.
            // (All sent first: one whose lengths now promise more bytes waits for the handshake timeout.)
            var mutatedClients: [RawHTTPClient] = []
            for _ in 0..<50 {
                var mutated = hello
                for _ in 0..<4 {
                    mutated[Int.random(in: 5..<mutated.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
                let client = try gateway.connect(receiveTimeout: 30)
                try client.send(mutated)
                mutatedClients.append(client)
            }
            let closed = try await offThePool { [mutatedClients] in mutatedClients.map { $0.waitForClose() } }
            #expect(closed.allSatisfy { $0 })
            // A plain-HTTP request to the TLS port is not a ClientHello either.
            let plain = try gateway.connect(receiveTimeout: 30)
            try plain.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let plainClosed = try await offThePool { plain.waitForClose() }
            #expect(plainClosed)

            // Every connection above is gone, and the listener still answers a ClientHello.
            #expect(await eventually { gateway.gateway.openConnections == 0 })
            let fresh = try gateway.connect(receiveTimeout: 30)
            try fresh.send(hello)
            let serverHello = try await offThePool { fresh.hasInput(waitingUpTo: 30) && fresh.peekByte() == 0x16 }
            #expect(serverHello)
        }
    }

    @Test("clients that close without close_notify leave nothing behind, and the listener still serves")
    func abruptClients() async throws {
        try await withGateway(tls: Self.localhost, policy: echoServicePolicy) { gateway, _ in
            for _ in 0..<20 {
                let abrupt = try TLSTestClient(port: gateway.port)
                #expect(try abrupt.request("GET", "/echo/abrupt").status == 200)
                abrupt.closeAbruptly()
            }
            let polite = try TLSTestClient(port: gateway.port)
            #expect(try polite.request("GET", "/echo/polite").status == 200)
            polite.close()

            #expect(await eventually { gateway.gateway.openConnections == 0 })
            #expect(try TLSTestClient(port: gateway.port).request("GET", "/echo/still-serving").status == 200)
        }
    }

    @Test("reload: new connections get the new certificate, an open one keeps working, tickets still resume; a mismatched key is refused")
    func reload() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-reload-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func install(_ certificate: String, _ key: String) throws {
            for (source, target) in [(certificate, "live.pem"), (key, "live-key.pem")] {
                let destination = directory + "/" + target
                try? FileManager.default.removeItem(atPath: destination)
                try FileManager.default.copyItem(atPath: TestCertificates.path(source), toPath: destination)
            }
        }
        try install("localhost.pem", "localhost-key.pem")
        let tls = "{ certificate: \"\(directory)/live.pem\", privateKey: \"\(directory)/live-key.pem\" }"
        try await withGateway(tls: tls, policy: echoServicePolicy) { gateway, _ in
            let open = try TLSTestClient(port: gateway.port)
            #expect(open.serverSubject == "CN=localhost")
            #expect(try open.request("GET", "/echo/before").status == 200)

            let session = try #require(open.session())
            defer { SSL_SESSION_free(session) }
            try install("renewed.pem", "renewed-key.pem")
            try gateway.gateway.reloadCertificates()
            #expect(try TLSTestClient(port: gateway.port).serverSubject == "CN=localhost-renewed")
            // A client holding a ticket from before the renewal still resumes (the keys carry over).
            var resuming = TLSTestClient.Options()
            resuming.session = session
            let resumed = try TLSTestClient(port: gateway.port, options: resuming)
            #expect(resumed.resumed)
            #expect(try resumed.request("GET", "/echo/resumed").status == 200)
            #expect(try open.request("GET", "/echo/after").status == 200)  // the open connection is untouched

            try install("renewed.pem", "other-key.pem")
            #expect {
                try gateway.gateway.reloadCertificates()
            } throws: { error in
                let text = (error as? PolicyError)?.diagnostics.map(\.description).joined() ?? ""
                return text.contains("live-key.pem") && text.contains("does not match")
            }
            #expect(try TLSTestClient(port: gateway.port).serverSubject == "CN=localhost-renewed")
            #expect(try open.request("GET", "/echo/still").status == 200)
        }
    }

    @Test("broken certificate files are policy errors naming the file")
    func brokenCertificates() throws {
        func diagnostics(_ tls: String) -> [String] {
            let text = """
                listeners:
                  - { name: secure, port: 0, tls: \(tls) }
                """
            do {
                let snapshot = try PolicyLoader().load(sources: [(file: "/policies/gateway.yaml", text: text)])
                _ = try ListenerTLS.contexts(for: snapshot)
                return []
            } catch {
                return error.diagnostics.map(\.description)
            }
        }
        let path = TestCertificates.path
        let expired = diagnostics("{ certificate: \"\(path("expired.pem"))\", privateKey: \"\(path("expired-key.pem"))\" }")
        #expect(
            expired.count == 1 && expired[0].contains("listeners.0.tls.certificate: \(path("expired.pem")): the certificate expired"),
            "\(expired)")
        let notYet = diagnostics("{ certificate: \"\(path("notyet.pem"))\", privateKey: \"\(path("notyet-key.pem"))\" }")
        #expect(notYet.count == 1 && notYet[0].contains("\(path("notyet.pem")): the certificate is not valid yet"), "\(notYet)")
        let missing = diagnostics("{ certificate: \"\(path("nope.pem"))\", privateKey: \"\(path("localhost-key.pem"))\" }")
        #expect(missing.count == 1 && missing[0].contains("\(path("nope.pem")): cannot read the file"), "\(missing)")
        let mismatched = diagnostics("{ certificate: \"\(path("localhost.pem"))\", privateKey: \"\(path("other-key.pem"))\" }")
        #expect(
            mismatched.count == 1
                && mismatched[0].contains("listeners.0.tls.privateKey: \(path("other-key.pem")): this private key does not match"),
            "\(mismatched)")
        let notPEM = diagnostics("{ certificate: \"\(path("localhost-key.pem"))\", privateKey: \"\(path("localhost-key.pem"))\" }")
        #expect(notPEM.count == 1 && notPEM[0].contains("not a PEM certificate chain"), "\(notPEM)")
        let ciphers = diagnostics(TestCertificates.listenerTLS("localhost", extra: ", ciphers: \"NOTHING-REAL\""))
        #expect(ciphers.count == 1 && ciphers[0].contains("listeners.0.tls.ciphers: no usable cipher"), "\(ciphers)")
        let relative = diagnostics("{ certificate: certs/server.pem, privateKey: certs/server-key.pem }")
        #expect(relative.first?.contains("/policies/certs/server.pem: cannot read the file") == true, "\(relative)")
        let noCA = diagnostics(TestCertificates.listenerTLS("localhost", extra: ", clientCertificates: required"))
        #expect(noCA.first?.contains("needs clientCA") == true, "\(noCA)")
    }

    /// Completes with the status of one upstream exchange.
    final class StatusCollector: UpstreamResponseHandler {
        let done: EventLoopPromise<Int>
        var status = 0
        var task: (any UpstreamTask)?

        init(_ done: EventLoopPromise<Int>) { self.done = done }

        func upstreamReceived(_ events: UpstreamEvents) {
            if let head = events.head { status = head.status }
            if let body = events.body, events.result == nil { task?.consumed(bytes: body.readableBytes) }
            switch events.result {
            case .success: done.succeed(status)
            case .failure(let error): done.fail(error)
            case nil: break
            }
        }
    }

    @Test("1,000 concurrent TLS connections each make a few keep-alive requests")
    func thousandConnections() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        try #require(limit.rlim_cur >= 2600, "needs an open-file limit of at least 2600 (2 sockets per connection and the backend's)")

        try await withGateway(tls: Self.localhost, policy: echoServicePolicy) { gateway, _ in
            let client = CurlUpstreamClient(configuration: .init(threads: 2, maxConnectionsPerHost: 1000, maxIdleConnections: 1000))
            defer { client.shutdown() }
            let group = MultiThreadedEventLoopGroup.singleton
            let connections = 1000
            for round in 0..<3 {
                let futures = (0..<connections).map { index -> EventLoopFuture<Int> in
                    let loop = group.next()
                    return loop.flatSubmit {
                        let collector = StatusCollector(loop.makePromise())
                        var request = UpstreamRequest(
                            method: "GET", url: "https://localhost:\(gateway.port)/echo/\(round)/\(index)", connectTimeout: .seconds(20),
                            timeout: .seconds(60))
                        request.trustedCAFile = TestCertificates.path("ca.pem")
                        collector.task = client.execute(request, eventLoop: loop, handler: collector)
                        return collector.done.futureResult
                    }
                }
                let statuses = try await EventLoopFuture.whenAllComplete(futures, on: group.next()).get()
                let ok = statuses.filter { if case .success(200) = $0 { true } else { false } }.count
                #expect(
                    ok == connections,
                    "round \(round): \(statuses.first { if case .success(200) = $0 { false } else { true } }.map { "\($0)" } ?? "")")
            }
            // Round one opened the connections (up to one per request); later rounds reused them.
            #expect(gateway.gateway.acceptedConnections >= connections * 9 / 10)
            #expect(gateway.gateway.acceptedConnections <= connections + connections / 5)
        }
    }
}
