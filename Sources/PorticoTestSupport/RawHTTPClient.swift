import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A deliberately simple blocking HTTP/1.1 client over a plain socket, so tests control every byte
/// they send (malformed requests, half heads, pipelining) and see every byte the gateway answers.
public final class RawHTTPClient: @unchecked Sendable {  // one thread at a time uses a client
    public struct Response: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]

        public init(status: Int, headers: [(String, String)], body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        public func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
        public var bodyText: String { String(decoding: body, as: UTF8.self) }
        public var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] }
    }

    public struct ClosedError: Error {}
    public struct TimeoutError: Error {}
    /// What arrived is not an HTTP/1.1 status line.
    public struct MalformedResponseError: Error {}

    private let fd: Int32
    private var buffer: [UInt8] = []
    /// Bytes received since the connection opened, consumed or not.
    public private(set) var receivedBytes = 0

    public init(port: Int, receiveTimeout: Double = 10, socketOptions: SocketOptions = SocketOptions()) throws {
        guard let fd = Self.connectLoopback(port: port, receiveTimeout: receiveTimeout, options: socketOptions) else {
            throw ClosedError()
        }
        self.fd = fd
    }

    /// For clients that misbehave on purpose.
    public struct SocketOptions: Sendable {
        /// `SO_RCVBUF`, set before connecting so the advertised window stays small: a client that
        /// stops reading then stops the gateway's writes soon.
        public var receiveBufferSize: Int32?
        /// Seconds after which a blocked send gives up (`SO_SNDTIMEO`); nil blocks for ever.
        public var sendTimeout: Double?
        /// The loopback address to connect from (`127.0.0.2`, say: another client to the gateway).
        public var sourceAddress: String?

        public init(receiveBufferSize: Int32? = nil, sendTimeout: Double? = nil, sourceAddress: String? = nil) {
            self.receiveBufferSize = receiveBufferSize
            self.sendTimeout = sendTimeout
            self.sourceAddress = sourceAddress
        }
    }

    /// A blocking TCP socket connected to 127.0.0.1:`port`, whose reads give up after
    /// `receiveTimeout` seconds; nil when the connection is refused.
    public static func connectLoopback(port: Int, receiveTimeout: Double, options: SocketOptions = SocketOptions()) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = options.receiveBufferSize {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if let seconds = options.sendTimeout {
            var timeout = Self.timeval(seconds)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        if let source = options.sourceAddress {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                close(fd)
                return nil
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            return nil
        }
        var timeout = Self.timeval(receiveTimeout)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    private static func timeval(_ seconds: Double) -> Glibc.timeval {
        Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
    }

    deinit { close(fd) }

    /// Hangs up, as a client that gives up waiting does (the descriptor is released with this object).
    public func hangUp() { shutdown(fd, Int32(SHUT_RDWR)) }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { throw ClosedError() }
            offset += sent
        }
    }

    /// Reads more bytes; false at EOF.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { throw TimeoutError() }
            if errno == ECONNRESET { return false }
            throw ClosedError()
        }
        if count == 0 { return false }
        receivedBytes += count
        buffer.append(contentsOf: chunk[0..<count])
        return true
    }

    /// Bytes received but not yet read as part of a response.
    public var unreadBytes: Int { buffer.count }

    /// Whether bytes, an EOF or an error wait to be read, now or within `seconds`.
    public func hasInput(waitingUpTo seconds: Double = 0) -> Bool {
        if !buffer.isEmpty { return true }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, Int32(seconds * 1000)) > 0
    }

    /// The next byte to read, without consuming it; nil at EOF.
    public func peekByte() -> UInt8? {
        if buffer.isEmpty, (try? fill()) != true { return nil }
        return buffer.first
    }

    /// Exactly `count` bytes, however many reads they take; nil if the connection ends first
    /// (for protocols other than HTTP/1.1: raw HTTP/2 frames).
    public func readExactly(_ count: Int) throws -> [UInt8]? {
        while buffer.count < count {
            if try !fill() { return nil }
        }
        let bytes = Array(buffer[..<count])
        buffer.removeFirst(count)
        return bytes
    }

    /// True when the peer closed the connection (reads EOF) before `timeout`.
    public func waitForClose() -> Bool {
        while true {
            do {
                if try !fill() { return true }
            } catch is TimeoutError {
                return false
            } catch {
                return true
            }
        }
    }

    private func readLine() throws -> String {
        while true {
            if let index = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var line = Array(buffer[..<index])
                buffer.removeFirst(index + 1)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            if try !fill() { throw ClosedError() }
        }
    }

    private func readBytes(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            if try !fill() { throw ClosedError() }
        }
        let bytes = Array(buffer[..<count])
        buffer.removeFirst(count)
        return bytes
    }

    /// Reads one response. `headRequest` for answers to HEAD (no body whatever the headers say).
    /// `bodySink`, if given, receives the body in pieces instead of collecting it (for big bodies).
    public func readResponse(headRequest: Bool = false, bodySink: (([UInt8]) -> Void)? = nil) throws -> Response {
        let statusLine = try readLine()
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else { throw MalformedResponseError() }
        var headers: [(String, String)] = []
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            if let colon = line.firstIndex(of: ":") {
                headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
        }
        var response = Response(status: status, headers: headers, body: [])
        let deliver: ([UInt8]) -> Void = { bytes in
            if let bodySink { bodySink(bytes) } else { response.body.append(contentsOf: bytes) }
        }
        if headRequest || status == 204 || status == 304 || status < 200 { return response }
        if let length = response.header("content-length").flatMap(Int.init) {
            var remaining = length
            while remaining > 0 {
                if buffer.isEmpty, try !fill() { throw ClosedError() }
                let take = min(remaining, buffer.count)
                deliver(Array(buffer[..<take]))
                buffer.removeFirst(take)
                remaining -= take
            }
        } else if response.header("transfer-encoding")?.lowercased() == "chunked" {
            while true {
                let sizeLine = try readLine()
                guard let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else { throw ClosedError() }
                if size == 0 {
                    while try !readLine().isEmpty {}
                    break
                }
                deliver(try readBytes(size))
                _ = try readLine()
            }
        } else {
            while try fill() {}
            deliver(buffer)
            buffer.removeAll()
        }
        return response
    }

    /// Sends a request and reads its response.
    public func request(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: String? = nil, host: String = "gateway.test"
    ) throws -> Response {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: \(host)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.utf8.count)\r\n" }
        text += "\r\n"
        if let body { text += body }
        try send(text)
        return try readResponse(headRequest: method == "HEAD")
    }
}
