import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Loopback ports that refuse connections, for "the backend is down" tests.
///
/// A socket is bound to the port and never listens: the kernel answers every connection attempt
/// with a reset (`ECONNREFUSED`), and, since the socket holds the port until the test process
/// ends, no other test's server can be given it meanwhile. (Shutting a server down and reusing its
/// port left a window in which a parallel test's server took it and answered.)
public enum RefusingPort {
    private static let held = NIOLockedValueBox<[Int32]>([])

    /// A new refusing port.
    public static func make() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else {
            let failure = POSIXError(.init(rawValue: errno) ?? .EIO)
            close(descriptor)
            throw failure
        }
        held.withLockedValue { $0.append(descriptor) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
