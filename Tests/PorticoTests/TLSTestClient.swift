import CPorticoOpenSSL
import Foundation

@testable import PorticoTLS

#if canImport(Glibc)
import Glibc
import PorticoTestSupport
#endif

/// A blocking TLS client over a plain socket, driven with OpenSSL directly, so that tests choose
/// every parameter of the handshake (versions, SNI, client certificate, session to resume) and can
/// misbehave on purpose (close without close_notify).
final class TLSTestClient: @unchecked Sendable {  // one thread at a time uses a client
    struct Options {
        var serverName: String? = "localhost"
        /// Verify the server against this CA (and `serverName` as its host name); nil skips verification.
        var caFile: String? = TestCertificates.path("ca.pem")
        var certificate: (chain: String, key: String)?
        var minVersion: Int32 = 0
        var maxVersion: Int32 = 0
        var offerALPN = true
        var session: OpaquePointer?
        var socket = RawHTTPClient.SocketOptions()
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let fd: Int32
    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private var buffer: [UInt8] = []
    /// The name the handshake asked for (SNI).
    let serverName: String?

    init(port: Int, options: Options = Options()) throws {
        serverName = options.serverName
        guard let context = portico_tls_client_context_new(options.minVersion, options.maxVersion) else {
            throw Failure(description: "cannot create a client context")
        }
        if options.maxVersion == 11 {
            // OpenSSL 3 will not even offer TLS 1.1 at its default security level.
            SSL_CTX_set_security_level(context, 0)
            SSL_CTX_set_cipher_list(context, "DEFAULT:@SECLEVEL=0")
        }
        if let caFile = options.caFile {
            SSL_CTX_load_verify_locations(context, caFile, nil)
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        }
        if let certificate = options.certificate {
            SSL_CTX_use_certificate_chain_file(context, certificate.chain)
            SSL_CTX_use_PrivateKey_file(context, certificate.key, SSL_FILETYPE_PEM)
        }
        self.context = context
        ssl = SSL_new(context)!
        guard let fd = RawHTTPClient.connectLoopback(port: port, receiveTimeout: 10, options: options.socket) else {
            SSL_free(ssl)
            SSL_CTX_free(context)
            throw Failure(description: "connect failed: \(errno)")
        }
        self.fd = fd
        SSL_set_fd(ssl, fd)
        if let name = options.serverName {
            _ = portico_tls_set_host_name(ssl, name)
            if options.caFile != nil { SSL_set1_host(ssl, name) }
        }
        if options.offerALPN {
            let protocols: [UInt8] = [8] + Array("http/1.1".utf8)
            _ = SSL_set_alpn_protos(ssl, protocols, UInt32(protocols.count))
        }
        if let session = options.session { SSL_set_session(ssl, session) }
        ERR_clear_error()
        guard SSL_connect(ssl) == 1 else {
            throw Failure(description: "handshake failed: \(Self.errors())")
        }
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
        Glibc.close(fd)
    }

    var version: String { String(cString: SSL_get_version(ssl)) }
    var resumed: Bool { SSL_session_reused(ssl) == 1 }
    var applicationProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        return data.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self) }
    }

    /// The subject of the certificate the server presented.
    var serverSubject: String? {
        var subject = [CChar](repeating: 0, count: 512)
        let length = portico_tls_peer_subject(ssl, &subject, subject.count)
        return length > 0 ? String(decoding: subject.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    }

    /// The session to resume on a later connection (owned by the caller: `SSL_SESSION_free`).
    func session() -> OpaquePointer? { SSL_get1_session(ssl) }

    func send(_ text: String) throws {
        var bytes = Array(text.utf8)
        ERR_clear_error()
        guard SSL_write(ssl, &bytes, Int32(bytes.count)) == Int32(bytes.count) else {
            throw Failure(description: "write failed: \(Self.errors())")
        }
    }

    /// Sends a request and reads a response framed by Content-Length. `host` is `Host`'s value;
    /// by default, the name the handshake asked for (SNI), as a browser sends it.
    func request(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: String? = nil, host: String? = nil
    ) throws -> RawHTTPClient.Response {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: \(host ?? serverName ?? "localhost")\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.utf8.count)\r\n" }
        text += "\r\n" + (body ?? "")
        try send(text)
        return try readResponse()
    }

    func readResponse() throws -> RawHTTPClient.Response {
        let separator = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil {
            headEnd = buffer.indices.dropLast(3).first { buffer[$0..<$0 + 4].elementsEqual(separator) }
            if headEnd == nil { try fill() }
        }
        let head = String(decoding: buffer[..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
        buffer.removeFirst(headEnd! + 4)
        let status = Int(head[0].split(separator: " ")[1])!
        let headers = head.dropFirst().map { line -> (String, String) in
            let colon = line.firstIndex(of: ":")!
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = Int(headers.first { $0.0.lowercased() == "content-length" }?.1 ?? "0") ?? 0
        while buffer.count < length { try fill() }
        let body = Array(buffer.prefix(length))
        buffer.removeFirst(length)
        return RawHTTPClient.Response(status: status, headers: headers, body: body)
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 16384)
        ERR_clear_error()
        let count = SSL_read(ssl, &chunk, Int32(chunk.count))
        guard count > 0 else { throw Failure(description: "read failed (\(SSL_get_error(ssl, count))): \(Self.errors())") }
        buffer += chunk.prefix(Int(count))
    }

    /// Sends close_notify, then closes.
    func close() {
        SSL_shutdown(ssl)
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Closes the socket without close_notify, as a crashed or careless client would.
    func closeAbruptly() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Whether the server closed the connection (reads end) within the socket's timeout.
    func waitForClose() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            ERR_clear_error()
            let count = SSL_read(ssl, &chunk, Int32(chunk.count))
            if count > 0 { continue }
            let error = SSL_get_error(ssl, count)
            return error == SSL_ERROR_ZERO_RETURN || error == SSL_ERROR_SYSCALL || error == SSL_ERROR_SSL
        }
    }

    /// OpenSSL's queued errors, drained the way the gateway drains them.
    static func errors() -> String {
        OpenSSLErrors.drain().joined(separator: "; ")
    }
}
