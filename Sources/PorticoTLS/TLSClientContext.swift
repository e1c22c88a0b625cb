import CPorticoOpenSSL
import NIOCore

/// An OpenSSL client context for the gateway's own outbound TLS connections (fleet mode's
/// `rediss://`): TLS 1.2 at least, the server's certificate verified against a CA file (or the
/// system's trust store), and ``TLSClientHandler`` checking it names the host connected to.
public final class TLSClientContext: @unchecked Sendable {
    // Unchecked: the SSL_CTX is configured in `init` and only read afterwards (OpenSSL allows
    // SSL_new and handshakes on one context from several threads at once).
    let context: OpaquePointer
    /// The CA file server certificates are verified against; `nil` for the system's trust store.
    public let caFile: String?

    /// - Parameters:
    ///   - caFile: a PEM file of the CA certificates to trust; `nil` trusts the system's.
    ///   - applicationProtocols: offered through ALPN (`h2` for an HTTP/2 backend); none by default.
    public init(caFile: String?, applicationProtocols: [String] = []) throws(TLSConfigurationError) {
        OpenSSLErrors.clear()
        guard let context = portico_tls_client_context_new(12, 0) else {
            throw TLSConfigurationError(
                setting: .context, file: nil,
                message: "OpenSSL could not create a client context: \(OpenSSLErrors.drain().joined(separator: "; "))")
        }
        if let caFile {
            guard let file = fopen(caFile, "r") else {
                SSL_CTX_free(context)
                throw TLSConfigurationError(setting: .trustedCA, file: caFile, message: "cannot be opened")
            }
            fclose(file)
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                let messages = OpenSSLErrors.drain().joined(separator: "; ")
                SSL_CTX_free(context)
                throw TLSConfigurationError(setting: .trustedCA, file: caFile, message: "not a PEM file of CA certificates (\(messages))")
            }
        } else if SSL_CTX_set_default_verify_paths(context) != 1 {
            let messages = OpenSSLErrors.drain().joined(separator: "; ")
            SSL_CTX_free(context)
            throw TLSConfigurationError(
                setting: .trustedCA, file: nil, message: "the system's CA certificates cannot be loaded (\(messages))")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        if !applicationProtocols.isEmpty {
            let wire = applicationProtocols.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
            // Returns 0 on success, unlike most of OpenSSL.
            guard SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) == 0 else {
                SSL_CTX_free(context)
                throw TLSConfigurationError(setting: .context, file: nil, message: "OpenSSL refused the ALPN list \(applicationProtocols)")
            }
        }
        self.context = context
        self.caFile = caFile
    }

    deinit {
        SSL_CTX_free(context)
    }
}
