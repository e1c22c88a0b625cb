/// How one listener terminates TLS. Paths are absolute (the policy resolves them).
public struct TLSConfiguration: Sendable, Hashable {
    /// A certificate chain (leaf first, PEM) and its private key (PEM).
    public struct CertificateFiles: Sendable, Hashable {
        public var certificateChain: String
        public var privateKey: String

        public init(certificateChain: String, privateKey: String) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
        }
    }

    public enum ProtocolVersion: Int, Sendable, Hashable {
        case tls12 = 12
        case tls13 = 13
    }

    public enum ClientCertificates: Sendable, Hashable {
        /// Client certificates are not asked for.
        case none
        /// Asked for and, when sent, verified against the CA file; a client may send none.
        case optional(caFile: String)
        /// A client without a certificate from the CA file fails the handshake.
        case required(caFile: String)
    }

    /// What ALPN may agree on (RFC 7301). With both, `h2` is preferred; a client that offers
    /// neither still gets a connection, without ALPN (see ``TLSConnectionInfo/applicationProtocol``).
    public enum ApplicationProtocol: String, Sendable, Hashable, CaseIterable {
        case http11 = "http/1.1"
        case h2
    }

    /// The first is served when the client sends no SNI name or a name no certificate matches;
    /// the others are chosen by the name their certificate is valid for.
    public var certificates: [CertificateFiles]
    public var minimumVersion: ProtocolVersion = .tls12
    /// The protocols offered through ALPN; never empty.
    public var applicationProtocols: Set<ApplicationProtocol> = [.http11]
    /// TLS 1.2 cipher list (OpenSSL syntax). The default keeps forward-secret AEAD suites only.
    public var cipherList = TLSConfiguration.defaultCipherList
    /// TLS 1.3 cipher suites (OpenSSL syntax); `nil` keeps OpenSSL's defaults.
    public var cipherSuites: String?
    /// Key-exchange groups, most preferred first.
    public var groups = TLSConfiguration.defaultGroups
    public var clientCertificates = ClientCertificates.none
    /// Longest time from accept to a completed handshake.
    public var handshakeTimeout: Duration = .seconds(10)
    /// Longest time a closing connection waits for its close_notify (or a failure's alert) to be
    /// written before it closes the socket anyway. Short: a peer that reads answers at once, and one
    /// that stopped reading never will, yet each such wait holds a descriptor, and a graceful
    /// shutdown waits for it after its grace period.
    public var closeTimeout: Duration = .seconds(3)

    public static let defaultCipherList = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL"
    public static let defaultGroups = "X25519:P-256:P-384"

    public init(certificates: [CertificateFiles]) {
        self.certificates = certificates
    }
}
