import CClientTLS

#if canImport(Glibc)
    import Glibc
#endif

/// A byte stream the client speaks HTTP/1.1 over: a plain socket or OpenSSL on top of one.
protocol ByteStream {
    func send(_ bytes: UnsafeRawBufferPointer) throws
    /// Fills some of `space`; zero means the peer closed.
    func receive(into space: UnsafeMutableRawBufferPointer) throws -> Int
}

struct ClientError: Error, CustomStringConvertible {
    let description: String
}

/// A blocking TCP connection to 127.0.0.1.
final class PlainStream: ByteStream {
    let socket: Int32

    init(port: Int) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw ClientError(description: "socket: \(errno)") }
        var yes: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw ClientError(description: "connect to port \(port): \(errno)") }
    }

    deinit { close(socket) }

    func send(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = Glibc.send(socket, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            guard sent > 0 else { throw ClientError(description: "send: \(errno)") }
            offset += sent
        }
    }

    func receive(into space: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = recv(socket, space.baseAddress, space.count, 0)
        guard count >= 0 else { throw ClientError(description: "recv: \(errno)") }
        return count
    }
}

/// TLS over a ``PlainStream``, with the system OpenSSL; the certificate is not verified (the
/// benchmark's own development certificate, on loopback).
final class TLSStream: ByteStream {
    private let plain: PlainStream
    private let context: OpaquePointer
    private let ssl: OpaquePointer

    init(port: Int) throws {
        plain = try PlainStream(port: port)
        context = SSL_CTX_new(TLS_client_method())!
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        ssl = SSL_new(context)!
        SSL_set_fd(ssl, plain.socket)
        guard SSL_connect(ssl) == 1 else { throw ClientError(description: "TLS handshake failed") }
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    func send(_ bytes: UnsafeRawBufferPointer) throws {
        guard SSL_write(ssl, bytes.baseAddress, Int32(bytes.count)) == Int32(bytes.count) else {
            throw ClientError(description: "SSL_write failed")
        }
    }

    func receive(into space: UnsafeMutableRawBufferPointer) throws -> Int {
        let count = SSL_read(ssl, space.baseAddress, Int32(space.count))
        if count > 0 { return Int(count) }
        if SSL_get_error(ssl, count) == SSL_ERROR_ZERO_RETURN { return 0 }
        throw ClientError(description: "SSL_read failed")
    }
}

/// Sends one request at a time on a keep-alive connection and reads its whole answer, framed by
/// `Content-Length` (both the backend and the gateway send one for a small body). One buffer for
/// the connection's life, so the client allocates nothing per request once warm.
final class BlockingHTTPClient {
    private let stream: any ByteStream
    private let request: [UInt8]
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    init(stream: any ByteStream, path: String, headers: [(name: String, value: String)] = []) {
        self.stream = stream
        let fields = headers.map { "\($0.name): \($0.value)\r\n" }.joined()
        self.request = Array("GET \(path) HTTP/1.1\r\nHost: localhost\r\n\(fields)\r\n".utf8)
    }

    /// One exchange; returns the status code.
    func exchange() throws -> Int {
        try request.withUnsafeBytes { try stream.send($0) }
        var filled = 0
        var headEnd: Int?
        var total: Int?
        while total == nil || filled < total! {
            let count = try buffer.withUnsafeMutableBytes { space in
                try stream.receive(into: UnsafeMutableRawBufferPointer(rebasing: space[filled...]))
            }
            guard count > 0 else { throw ClientError(description: "connection closed mid-response") }
            filled += count
            if headEnd == nil, let end = Self.headEnd(buffer, filled) {
                headEnd = end
                guard let length = Self.contentLength(buffer[..<end]) else { throw ClientError(description: "no Content-Length") }
                total = end + length
            }
        }
        guard filled == total else { throw ClientError(description: "more bytes than one response") }
        // "HTTP/1.1 200 ..."
        return Int(buffer[9] - 48) * 100 + Int(buffer[10] - 48) * 10 + Int(buffer[11] - 48)
    }

    private static func headEnd(_ bytes: [UInt8], _ count: Int) -> Int? {
        guard count >= 4 else { return nil }
        for index in 3..<count where bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
            return index + 1
        }
        return nil
    }

    private static func contentLength(_ head: ArraySlice<UInt8>) -> Int? {
        let text = String(decoding: head, as: UTF8.self).lowercased()
        guard let range = text.firstRange(of: "\r\ncontent-length:") else { return nil }
        let digits = text[range.upperBound...].drop { $0 == " " }.prefix { $0.isNumber }
        return Int(digits)
    }
}
