/// Where a value came from in the policy files, so that a mistake found later (a certificate that
/// does not match its key, found by OpenSSL) can still be reported against its file and key path.
public struct PolicyOrigin: Sendable, Hashable {
    public var file: String
    public var line: Int?
    public var keyPath: String

    public init(file: String, line: Int?, keyPath: String) {
        self.file = file
        self.line = line
        self.keyPath = keyPath
    }

    /// The same place, one key deeper (`listeners.0.tls` → `listeners.0.tls.ciphers`).
    public func child(_ key: String) -> PolicyOrigin {
        PolicyOrigin(file: file, line: line, keyPath: keyPath + "." + key)
    }

    public func diagnostic(_ message: String) -> PolicyDiagnostic {
        PolicyDiagnostic(file: file, line: line, keyPath: keyPath, message: message)
    }
}

/// A file named by the policy: its path resolved against the naming file's directory.
public struct PolicyFile: Sendable, Hashable {
    public var path: String
    public var origin: PolicyOrigin
}

/// TLS on one listener. The files are checked when the gateway builds its TLS contexts (at start,
/// in `portico check`, and on a certificate reload), since that takes OpenSSL.
public struct ListenerTLSPolicy: Sendable, Hashable {
    public struct Certificate: Sendable, Hashable {
        public var chain: PolicyFile
        public var privateKey: PolicyFile
    }

    public enum ClientCertificates: String, Sendable, Hashable, CaseIterable {
        case none, optional, required
    }

    /// The first is the default; SNI picks another when the client asks for a name it is valid for.
    public var certificates: [Certificate]
    /// `12` or `13`.
    public var minimumVersion: Int = 12
    public var ciphers: String?
    public var cipherSuites: String?
    public var groups: String?
    public var clientCertificates = ClientCertificates.none
    public var clientCA: PolicyFile?
    public var handshakeTimeout: Duration = .seconds(10)
    /// Where the `tls` mapping itself is, for settings without a file of their own.
    public var origin: PolicyOrigin
}
