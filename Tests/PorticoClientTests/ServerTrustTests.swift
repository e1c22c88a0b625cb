import Foundation
import PorticoDemoBackends
import PorticoTestSupport
import PorticoTesting
import Testing

@testable import PorticoClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A development CA and server certificate made by the quick start's own script, in a directory of
/// this run's; and the test CA set (`TestCertificates`) for a CA that did not sign the gateway.
enum DevelopmentCertificates {
    static let directory: String = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-dev-certs-\(UUID().uuidString)").path
        let script = Repository.root.appendingPathComponent("certs/make-dev-certs.sh").path
        let result = try! ChildProcess.run("/bin/bash", [script, directory])
        precondition(result.termination == .exited(0), "make-dev-certs.sh failed: \(String(decoding: result.errors, as: UTF8.self))")
        return directory
    }()

    static func text(_ name: String) throws -> String { try String(contentsOfFile: directory + "/" + name, encoding: .utf8) }
    /// The listener's `tls` mapping; the first call makes the certificates, off the cooperative pool.
    static func listenerTLS() async throws -> String {
        let directory = try await offThePool { Self.directory }
        return "{ certificate: \"\(directory)/server.pem\", privateKey: \"\(directory)/server-key.pem\" }"
    }

    /// `openssl`'s own pin of a certificate's key: the SPKI's DER, hashed, base64.
    static func opensslPin(ofCertificateAt path: String) throws -> String {
        let pipeline =
            "openssl x509 -pubkey -noout -in '\(path)' | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"
        let result = try ChildProcess.run("/bin/sh", ["-c", pipeline])
        #expect(result.termination == .exited(0))
        return String(decoding: result.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

@Suite("ServerTrust: certificates, pins and their errors")
struct ServerTrustValueTests {
    @Test("a certificate's pin is the SHA-256 of its SubjectPublicKeyInfo, as openssl computes it")
    func pinMatchesOpenSSL() async throws {
        let directories = try await offThePool { (DevelopmentCertificates.directory, TestCertificates.directory) }
        for path in ["\(directories.0)/server.pem", "\(directories.1)/ca.pem", "\(directories.1)/other.pem"] {
            let pin = try ServerTrust.publicKeyPin(ofCertificatePEM: String(contentsOfFile: path, encoding: .utf8))
            #expect(pin == "sha256/" + (try await DevelopmentCertificates.opensslPin(ofCertificateAt: path)), "\(path)")
        }
    }

    @Test("an RSA certificate's key is found as well as an EC one's")
    func rsaCertificate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portico-rsa-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let made = try await offThePool {
            try ChildProcess.run(
                "/bin/sh",
                [
                    "-c",
                    "cd '\(directory)' && openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=rsa.test -days 1 -keyout k.pem -out c.pem",
                ])
        }
        #expect(made.termination == .exited(0))
        let pin = try ServerTrust.publicKeyPin(ofCertificatePEM: String(contentsOfFile: directory + "/c.pem", encoding: .utf8))
        #expect(pin == "sha256/" + (try await DevelopmentCertificates.opensslPin(ofCertificateAt: directory + "/c.pem")))
    }

    @Test("a bundle of several PEM certificates gives each, in order")
    func bundle() async throws {
        _ = try await offThePool { (DevelopmentCertificates.directory, TestCertificates.directory) }
        let pem =
            try DevelopmentCertificates.text("ca.pem") + "\n" + String(contentsOfFile: TestCertificates.path("ca.pem"), encoding: .utf8)
        let trust = try ServerTrust(certificateAuthoritiesPEM: pem)
        #expect(trust.certificateAuthorities.count == 2)
        #expect(!trust.isSystem && trust.trustsSystemRoots)
        #expect(ServerTrust.system.isSystem)
    }

    @Test("a digest whose base64 starts with / reads the same in OkHttp's, curl's and the bare form")
    func slashPins() throws {
        let digest = Data([0xFC] + [UInt8](repeating: 7, count: 31))
        let base64 = digest.base64EncodedString()
        #expect(base64.hasPrefix("/"))
        for pin in ["sha256/" + base64, "sha256//" + base64, base64] {
            #expect(try ServerTrust(pinnedPublicKeys: [pin]).pinnedPublicKeys == [digest], "\(pin)")
        }
        // And curl's form of one that does not start with /.
        let plain = Data(repeating: 1, count: 32)
        #expect(try ServerTrust(pinnedPublicKeys: ["sha256//" + plain.base64EncodedString()]).pinnedPublicKeys == [plain])
    }

    @Test("text that is not PEM, a block that is not a certificate, a bad pin and a trust of nothing are refused, each by name")
    func refusals() async throws {
        _ = try await offThePool { DevelopmentCertificates.directory }
        #expect(throws: ServerTrustError.notPEM) { try ServerTrust(certificateAuthoritiesPEM: "hello") }
        let unterminated = try DevelopmentCertificates.text("ca.pem").replacingOccurrences(of: "-----END CERTIFICATE-----", with: "")
        #expect(throws: ServerTrustError.notPEM) { try ServerTrust(certificateAuthoritiesPEM: unterminated) }
        let notACertificate =
            "-----BEGIN CERTIFICATE-----\n\(Data("not a certificate at all".utf8).base64EncodedString())\n-----END CERTIFICATE-----\n"
        #expect(throws: ServerTrustError.notACertificate(index: 0)) { try ServerTrust(certificateAuthoritiesPEM: notACertificate) }
        #expect(throws: ServerTrustError.invalidPin("sha256/abc")) { try ServerTrust(pinnedPublicKeys: ["sha256/abc"]) }
        #expect(throws: ServerTrustError.trustsNothing) { try ServerTrust(trustsSystemRoots: false) }
        // The three spellings of one pin are one digest.
        let digest = Data(repeating: 7, count: 32).base64EncodedString()
        let spelled = try ServerTrust(pinnedPublicKeys: ["sha256/" + digest, "sha256//" + digest, digest])
        #expect(Set(spelled.pinnedPublicKeys).count == 1)
    }

    @Test("every truncation of a certificate is refused without reading past its bytes")
    func truncations() async throws {
        _ = try await offThePool { DevelopmentCertificates.directory }
        let der = try ServerTrust.certificates(fromPEM: DevelopmentCertificates.text("server.pem"))[0]
        #expect(CertificateDER.subjectPublicKeyInfo(ofCertificate: der) != nil)
        for length in 0..<der.count {
            #expect(CertificateDER.subjectPublicKeyInfo(ofCertificate: der.prefix(length)) == nil, "\(length) bytes")
        }
        #expect(CertificateDER.subjectPublicKeyInfo(ofCertificate: der + [0]) == nil)
    }
}

/// The façade against the real gateway serving HTTPS with the development CA, which no system
/// trusts: the locator and the calls both go through the trust.
@Suite("ServerTrust against the gateway over TLS")
struct ServerTrustGatewayTests {

    @Test("with the system's roots only, the development CA is not trusted: .transport, nothing served")
    func systemRefuses() async throws {
        try await FacadeFixture.run(tls: try await DevelopmentCertificates.listenerTLS()) { _, locator, backends in
            #expect(locator.scheme == "https")
            let api = FacadeFixture.api(locator)
            let error = await #expect(throws: PorticoAPIError.transport) { try await api.get("stockQuote", path: "/AAPL", as: Quote.self) }
            #expect(error?.underlying is URLError, "\(String(describing: error?.underlying))")
            #expect(backends[0].requestsReceived == 0)
        }
    }

    @Test("the development CA as a trust: the locator and a GET and a signed POST over TLS")
    func privateAuthority() async throws {
        struct Order: Encodable { var symbol: String }
        try await FacadeFixture.run(tls: try await DevelopmentCertificates.listenerTLS()) { _, locator, backends in
            let trust = try ServerTrust(certificateAuthoritiesPEM: try DevelopmentCertificates.text("ca.pem"))
            let api = FacadeFixture.api(locator, trust: trust)
            let quote = try await api.response(for: APIRequest(method: "GET", service: "stockQuote", path: "/AAPL"), as: Quote.self)
            #expect(quote.value.symbol == "AAPL" && quote.apiVersion == "2" && quote.status == 200)
            let echoed = try await api.post("echo", path: "/orders", body: Order(symbol: "MSFT"), as: Echoed.self)
            #expect(echoed.method == "POST" && echoed.body.contains("MSFT"))
            #expect(echoed.headers["content-digest"]?.hasPrefix("sha-256=:") == true)
            #expect(backends[0].requestsReceived == 1 && backends[1].requestsReceived == 1)
            // The same trust for a locator client on its own.
            let standalone = ServiceLocatorClient(
                url: locator, transport: TrustingLocatorTransport(trust: trust), pinnedKey: FacadeFixture.pinned)
            #expect(try await standalone.refresh().endpoint(service: "stockQuote", version: "2") != nil)
        }
    }

    @Test("only the development CA, without the system's roots, still reaches the gateway; another CA alone does not")
    func authoritiesOnly() async throws {
        try await FacadeFixture.run(tls: try await DevelopmentCertificates.listenerTLS()) { _, locator, backends in
            let own = try ServerTrust(certificateAuthoritiesPEM: try DevelopmentCertificates.text("ca.pem"), trustsSystemRoots: false)
            let quote = try await FacadeFixture.api(locator, trust: own).get("stockQuote", path: "/AAPL", as: Quote.self)
            #expect(quote.symbol == "AAPL")
            let foreign = try ServerTrust(
                certificateAuthoritiesPEM: String(contentsOfFile: TestCertificates.path("foreign-ca.pem"), encoding: .utf8),
                trustsSystemRoots: false)
            let error = await #expect(throws: PorticoAPIError.transport) {
                try await FacadeFixture.api(locator, trust: foreign).get("stockQuote", path: "/MSFT", as: Quote.self)
            }
            #expect((error?.underlying as? URLError)?.code == .serverCertificateUntrusted, "\(String(describing: error?.underlying))")
            #expect(backends[0].requestsReceived == 1)
        }
    }

    @Test("a pin of the server's key admits it; a pin of another key refuses it, the CA notwithstanding")
    func pinning() async throws {
        try await FacadeFixture.run(tls: try await DevelopmentCertificates.listenerTLS()) { _, locator, backends in
            let ca = try DevelopmentCertificates.text("ca.pem")
            let serverPin = try ServerTrust.publicKeyPin(ofCertificatePEM: try DevelopmentCertificates.text("server.pem"))
            let pinned = try ServerTrust(certificateAuthoritiesPEM: ca, pinnedPublicKeys: [serverPin])
            #expect(try await FacadeFixture.api(locator, trust: pinned).get("stockQuote", path: "/AAPL", as: Quote.self).symbol == "AAPL")

            // The CA's key is in the chain but is not the server's: a pin names the server's own key.
            let wrongPin = try ServerTrust.publicKeyPin(ofCertificatePEM: ca)
            let mispinned = try ServerTrust(certificateAuthoritiesPEM: ca, pinnedPublicKeys: [wrongPin])
            let error = await #expect(throws: PorticoAPIError.transport) {
                try await FacadeFixture.api(locator, trust: mispinned).get("stockQuote", path: "/MSFT", as: Quote.self)
            }
            #expect((error?.underlying as? URLError)?.code == .serverCertificateUntrusted, "\(String(describing: error?.underlying))")
            #expect(backends[0].requestsReceived == 1)
        }
    }

    @Test("cancelling a call in flight through a trust stops it: .cancelled, while the backend still holds the request")
    func cancellation() async throws {
        let held = try await HeldBackend.start(body: #"{"symbol":"AAPL","name":"Apple Inc.","currentPrice":189.84}"#)
        defer { Task { try? await held.shutdown() } }
        try await FacadeFixture.run(quotesPort: held.port, tls: try await DevelopmentCertificates.listenerTLS()) { _, locator, _ in
            let trust = try ServerTrust(certificateAuthoritiesPEM: try DevelopmentCertificates.text("ca.pem"))
            let api = FacadeFixture.api(locator, trust: trust)
            // A POST is never shared with another caller: cancelling it cancels the transfer itself.
            let call = Task { try await api.post("stockQuote", path: "/AAPL", body: ["n": 1], as: Quote.self) }
            #expect(await eventually { held.requestsReceived == 1 })
            call.cancel()
            await #expect(throws: PorticoAPIError.cancelled) { try await call.value }
            held.release()
        }
    }
}

#if os(Linux)
import CPorticoClientCurl
import CPorticoCurl

/// The option, info and error numbers the client declares itself (it reads no curl header) are
/// libcurl's, as the real <curl/curl.h> the gateway builds with says.
@Suite("The client's libcurl numbers")
struct CurlABITests {
    @Test("each option, info and error number equals the header's")
    func numbers() {
        let options: [(Int32, CURLoption)] = [
            (PORTICO_CURLOPT_WRITEDATA, CURLOPT_WRITEDATA), (PORTICO_CURLOPT_ERRORBUFFER, CURLOPT_ERRORBUFFER),
            (PORTICO_CURLOPT_URL, CURLOPT_URL), (PORTICO_CURLOPT_WRITEFUNCTION, CURLOPT_WRITEFUNCTION),
            (PORTICO_CURLOPT_HTTPHEADER, CURLOPT_HTTPHEADER), (PORTICO_CURLOPT_HEADERDATA, CURLOPT_HEADERDATA),
            (PORTICO_CURLOPT_SSLVERSION, CURLOPT_SSLVERSION), (PORTICO_CURLOPT_CUSTOMREQUEST, CURLOPT_CUSTOMREQUEST),
            (PORTICO_CURLOPT_NOPROGRESS, CURLOPT_NOPROGRESS), (PORTICO_CURLOPT_NOBODY, CURLOPT_NOBODY),
            (PORTICO_CURLOPT_XFERINFODATA, CURLOPT_XFERINFODATA), (PORTICO_CURLOPT_HEADERFUNCTION, CURLOPT_HEADERFUNCTION),
            (PORTICO_CURLOPT_CAPATH, CURLOPT_CAPATH), (PORTICO_CURLOPT_NOSIGNAL, CURLOPT_NOSIGNAL),
            (PORTICO_CURLOPT_ACCEPT_ENCODING, CURLOPT_ACCEPT_ENCODING), (PORTICO_CURLOPT_POSTFIELDSIZE_LARGE, CURLOPT_POSTFIELDSIZE_LARGE),
            (PORTICO_CURLOPT_TIMEOUT_MS, CURLOPT_TIMEOUT_MS), (PORTICO_CURLOPT_COPYPOSTFIELDS, CURLOPT_COPYPOSTFIELDS),
            (PORTICO_CURLOPT_XFERINFOFUNCTION, CURLOPT_XFERINFOFUNCTION), (PORTICO_CURLOPT_PINNEDPUBLICKEY, CURLOPT_PINNEDPUBLICKEY),
            (PORTICO_CURLOPT_CAINFO_BLOB, CURLOPT_CAINFO_BLOB), (PORTICO_CURLOPT_PROTOCOLS_STR, CURLOPT_PROTOCOLS_STR),
            (PORTICO_CURLOPT_CONNECTTIMEOUT_MS, CURLOPT_CONNECTTIMEOUT_MS),
            (PORTICO_CURLOPT_SUPPRESS_CONNECT_HEADERS, CURLOPT_SUPPRESS_CONNECT_HEADERS),
        ]
        for (ours, theirs) in options { #expect(UInt32(ours) == theirs.rawValue, "option \(ours)") }
        #expect(UInt32(PORTICO_CURLINFO_RESPONSE_CODE) == CURLINFO_RESPONSE_CODE.rawValue)
        #expect(UInt32(PORTICO_CURLINFO_CAINFO) == CURLINFO_CAINFO.rawValue)
        #expect(Int(PORTICO_CURL_SSLVERSION_TLSv1_2) == CURL_SSLVERSION_TLSv1_2)
        let errors: [(Int32, CURLcode)] = [
            (PORTICO_CURLE_OK, CURLE_OK), (PORTICO_CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_HOST),
            (PORTICO_CURLE_COULDNT_CONNECT, CURLE_COULDNT_CONNECT), (PORTICO_CURLE_OPERATION_TIMEDOUT, CURLE_OPERATION_TIMEDOUT),
            (PORTICO_CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CONNECT_ERROR), (PORTICO_CURLE_ABORTED_BY_CALLBACK, CURLE_ABORTED_BY_CALLBACK),
            (PORTICO_CURLE_GOT_NOTHING, CURLE_GOT_NOTHING), (PORTICO_CURLE_SEND_ERROR, CURLE_SEND_ERROR),
            (PORTICO_CURLE_RECV_ERROR, CURLE_RECV_ERROR), (PORTICO_CURLE_PEER_FAILED_VERIFICATION, CURLE_PEER_FAILED_VERIFICATION),
            (PORTICO_CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CACERT_BADFILE),
            (PORTICO_CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_PINNEDPUBKEYNOTMATCH),
        ]
        for (ours, theirs) in errors { #expect(UInt32(ours) == theirs.rawValue, "error \(ours)") }
    }

    @Test("libcurl is found at run time, and a transfer to a refusing port fails as URLSession's would")
    func loadsAndClassifies() async throws {
        #expect(portico_client_curl_load() == 1)
        let port = try RefusingPort.make()
        let sender = CurlSender(trust: try ServerTrust(pinnedPublicKeys: [Data(repeating: 1, count: 32).base64EncodedString()]))
        let error = await #expect(throws: URLError.self) {
            try await sender.send(URLRequest(url: URL(string: "http://127.0.0.1:\(port)/")!))
        }
        #expect(error?.code == .cannotConnectToHost, "\(String(describing: error))")
    }
}
#endif
