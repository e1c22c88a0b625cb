import CPorticoOpenSSL

/// OpenSSL's thread-local error queue, read into Swift strings.
///
/// Every call into libssl starts with ``clear()``, so that a failure is explained by its own
/// errors and not by something an earlier call left behind; a failure then ``drain()``s the queue.
enum OpenSSLErrors {
    static func clear() {
        ERR_clear_error()
    }

    /// The queued errors, oldest first, as OpenSSL words them (`error:0A000086:SSL routines::certificate verify failed`).
    static func drain() -> [String] {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages
    }
}

/// Why a TLS connection failed, with what OpenSSL said about it.
public struct TLSError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The handshake failed: bad ClientHello, no shared version or cipher, a refused client certificate.
        case handshakeFailed
        /// The handshake did not complete within the listener's handshake timeout.
        case handshakeTimeout
        /// The peer closed the connection without sending close_notify: a truncation attack
        /// cannot be told from a careless client, so it is reported rather than taken as a clean end.
        case uncleanShutdown
        /// A record failed to decrypt or authenticate after the handshake.
        case protocolError
        /// OpenSSL could not allocate or set up a connection.
        case internalError
    }

    public let kind: Kind
    /// OpenSSL's own messages, oldest first (possibly none).
    public let openSSLErrors: [String]

    /// OpenSSL could not create the `SSL` object for a new connection.
    public static var setupFailed: TLSError { TLSError(.internalError, openSSLErrors: OpenSSLErrors.drain()) }

    init(_ kind: Kind, openSSLErrors: [String] = []) {
        self.kind = kind
        self.openSSLErrors = openSSLErrors
    }

    public var description: String {
        let base: String =
            switch kind {
            case .handshakeFailed: "TLS handshake failed"
            case .handshakeTimeout: "TLS handshake timed out"
            case .uncleanShutdown: "TLS connection closed without close_notify"
            case .protocolError: "TLS protocol error"
            case .internalError: "TLS internal error"
            }
        return openSSLErrors.isEmpty ? base : base + ": " + openSSLErrors.joined(separator: "; ")
    }
}
