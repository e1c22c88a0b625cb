#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The socket of each backend connection one ``CurlWorker``'s libcurl keeps, so a transfer can look
/// at its own connection's receive queue.
///
/// A transfer needs that to catch a backend sending more than its response declared: libcurl never
/// reads past a declared `Content-Length`, and 7.88 would keep the connection and give the excess to
/// the next request as the start of its response. libcurl 7.88 tells a transfer its socket
/// (`CURLINFO_ACTIVESOCKET`) only after the transfer has ended and the connection is back in the
/// pool, too late to refuse it; so the worker keeps this table itself: a transfer that opens a
/// connection learns the socket from `CURLOPT_SOCKOPTFUNCTION`, every transfer learns its
/// connection's addresses from `CURLOPT_PREREQFUNCTION` (called for new and reused connections
/// alike), and `CURLOPT_CLOSESOCKETFUNCTION` removes a socket when libcurl closes it, so a number
/// the kernel hands out again never points at the wrong connection. Confined to the worker's thread.
final class BackendSockets {
    /// A TCP connection as libcurl describes it to the pre-request callback. Linux lets outgoing
    /// connections to different peers share a local port, so the peer is part of the identity.
    struct Connection: Hashable {
        var localPort: Int
        var peerPort: Int
        var peerAddress: String
    }

    private var sockets: [Connection: Int32] = [:]
    private var connections: [Int32: Connection] = [:]

    /// The socket carrying `connection`. `opened` are the sockets libcurl opened for this transfer,
    /// if it connected rather than reusing a connection (more than one when it tried several
    /// addresses); the one bound to the connection's local port is recorded.
    func socket(for connection: Connection, opened: [Int32]) -> Int32? {
        for socket in opened where Self.localPort(of: socket) == connection.localPort {
            if let stale = sockets[connection] { connections[stale] = nil }
            sockets[connection] = socket
            connections[socket] = connection
            return socket
        }
        return sockets[connection]
    }

    /// libcurl closes `socket`.
    func closed(_ socket: Int32) {
        if let connection = connections.removeValue(forKey: socket), sockets[connection] == socket {
            sockets[connection] = nil
        }
    }

    /// Whether bytes wait in `socket`'s receive queue (a closed peer's end of stream is not a byte).
    static func hasPendingBytes(_ socket: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(socket, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) > 0
    }

    private static func localPort(of socket: Int32) -> Int? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        guard result == 0 else { return nil }
        switch Int32(address.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        case AF_INET6:
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
        default:
            return nil
        }
    }
}
