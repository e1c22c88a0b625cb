import CPorticoOpenSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A configuration that could not be turned into a TLS context, naming the file or setting at fault.
public struct TLSConfigurationError: Error, Sendable, CustomStringConvertible {
    public enum Setting: Sendable, Equatable {
        case certificateChain(index: Int)
        case privateKey(index: Int)
        case clientCA
        case cipherList
        case cipherSuites
        case groups
        case context
        /// The CA certificates a client context verifies servers against (``TLSClientContext``).
        case trustedCA
    }

    public let setting: Setting
    /// The file concerned, when there is one.
    public let file: String?
    public let message: String

    public var description: String { file.map { "\($0): \(message)" } ?? message }
}

/// The OpenSSL contexts of one listener: one `SSL_CTX` per certificate, the first being the
/// default, all with the same protocol settings. Immutable once built, so event loops share it
/// freely; a certificate reload builds a new one (see ``TLSContextStore``).
///
/// Connections hold a reference to the context they were accepted with, so an old context lives
/// until its last connection closes.
public final class TLSContext: @unchecked Sendable {
    // Unchecked: the SSL_CTX objects are configured in `init` and only read afterwards (OpenSSL
    // allows concurrent SSL_new and handshakes on one context).
    let contexts: [OpaquePointer]
    public let configuration: TLSConfiguration

    /// The seconds left until each certificate (in ``TLSConfiguration/certificates``' order)
    /// stops being valid, as the loaded certificate says (not the file, which may have been
    /// replaced since); nil where OpenSSL cannot tell.
    public var secondsUntilExpiry: [Int?] {
        contexts.map { context in
            var untilValid = 0
            var untilExpiry = 0
            guard portico_tls_ctx_certificate_validity(context, &untilValid, &untilExpiry) == 1 else { return nil }
            return untilExpiry
        }
    }

    /// Builds the contexts, checking every file: readable, a PEM chain, a PEM key that matches
    /// it, a certificate within its validity period.
    ///
    /// - Parameter previous: the context this one replaces (a reload). Its session-ticket keys
    ///   are carried over, so clients holding tickets keep resuming across a certificate renewal.
    public init(configuration: TLSConfiguration, replacing previous: TLSContext? = nil) throws(TLSConfigurationError) {
        guard !configuration.certificates.isEmpty else {
            throw TLSConfigurationError(setting: .context, file: nil, message: "at least one certificate is required")
        }
        var built: [OpaquePointer] = []
        do {
            for (index, files) in configuration.certificates.enumerated() {
                built.append(try Self.makeContext(configuration, files: files, index: index))
            }
        } catch {
            for context in built { SSL_CTX_free(context) }
            throw error
        }
        // Tickets are sealed and opened by the context a connection starts on (the default), so
        // every context shares its keys; a reload inherits them from the context it replaces.
        let keySource = previous?.defaultContext ?? built[0]
        for context in built where context != keySource {
            _ = portico_tls_ctx_copy_ticket_keys(keySource, context)
        }
        self.contexts = built
        self.configuration = configuration
        if built.count > 1 {
            portico_tls_ctx_set_servername_callback(built[0], selectCertificate, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    deinit {
        for context in contexts { SSL_CTX_free(context) }
    }

    /// The context new connections start on; SNI may move them to another.
    var defaultContext: OpaquePointer { contexts[0] }

    /// The context for an SNI name: the first non-default certificate valid for it, else nil.
    fileprivate func context(forServerName name: UnsafePointer<CChar>) -> OpaquePointer? {
        contexts.dropFirst().first { portico_tls_ctx_certificate_matches($0, name) == 1 }
    }

    /// How many certificates the listener has; with one, every name selects it.
    public var certificateCount: Int { contexts.count }

    /// Which certificate a handshake naming `serverName` is served with, as an index into the
    /// policy's list: the rule of the SNI callback, applied to any name (a request's `Host`, say).
    public func certificateIndex(forServerName serverName: String) -> Int {
        guard contexts.count > 1 else { return 0 }
        return serverName.withCString { name in
            contexts.indices.dropFirst().first { portico_tls_ctx_certificate_matches(contexts[$0], name) == 1 } ?? 0
        }
    }

    /// The index of `context` (one of these, as OpenSSL reports a connection's), 0 if none.
    func certificateIndex(of context: OpaquePointer?) -> Int {
        contexts.firstIndex { $0 == context } ?? 0
    }

    private static func makeContext(
        _ configuration: TLSConfiguration, files: TLSConfiguration.CertificateFiles, index: Int
    ) throws(TLSConfigurationError) -> OpaquePointer {
        OpenSSLErrors.clear()
        var protocols: Int32 = 0
        if configuration.applicationProtocols.contains(.http11) { protocols |= PORTICO_ALPN_HTTP11 }
        if configuration.applicationProtocols.contains(.h2) { protocols |= PORTICO_ALPN_H2 }
        guard let context = portico_tls_server_context_new(Int32(configuration.minimumVersion.rawValue), protocols) else {
            throw TLSConfigurationError(setting: .context, file: nil, message: "OpenSSL could not create a server context: \(errors())")
        }
        do {
            try configure(context, configuration, files: files, index: index)
            return context
        } catch {
            SSL_CTX_free(context)
            throw error
        }
    }

    private static func configure(
        _ context: OpaquePointer, _ configuration: TLSConfiguration, files: TLSConfiguration.CertificateFiles, index: Int
    ) throws(TLSConfigurationError) {
        let chain = files.certificateChain
        let key = files.privateKey
        try requireReadable(chain, setting: .certificateChain(index: index))
        try requireReadable(key, setting: .privateKey(index: index))
        guard SSL_CTX_use_certificate_chain_file(context, chain) == 1 else {
            throw TLSConfigurationError(
                setting: .certificateChain(index: index), file: chain, message: "not a PEM certificate chain (\(errors()))")
        }
        guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1 else {
            // OpenSSL compares the key with the certificate as it loads it.
            let messages = OpenSSLErrors.drain()
            if messages.contains(where: { $0.contains("key values mismatch") }) {
                throw TLSConfigurationError(
                    setting: .privateKey(index: index), file: key, message: "this private key does not match the certificate in \(chain)")
            }
            throw TLSConfigurationError(
                setting: .privateKey(index: index), file: key,
                message:
                    "not an unencrypted PEM private key (\(messages.isEmpty ? "no detail from OpenSSL" : messages.joined(separator: "; ")))"
            )
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            OpenSSLErrors.clear()
            throw TLSConfigurationError(
                setting: .privateKey(index: index), file: key, message: "this private key does not match the certificate in \(chain)")
        }
        var untilValid = 0
        var untilExpiry = 0
        if portico_tls_ctx_certificate_validity(context, &untilValid, &untilExpiry) == 1 {
            if untilExpiry <= 0 {
                throw TLSConfigurationError(
                    setting: .certificateChain(index: index), file: chain,
                    message: "the certificate expired \(-untilExpiry / 86400) day(s) ago")
            }
            if untilValid > 0 {
                throw TLSConfigurationError(
                    setting: .certificateChain(index: index), file: chain,
                    message: "the certificate is not valid yet (for another \(untilValid / 3600) hour(s); check the clock)")
            }
        }
        guard SSL_CTX_set_cipher_list(context, configuration.cipherList) == 1 else {
            throw TLSConfigurationError(
                setting: .cipherList, file: nil, message: "no usable cipher in \"\(configuration.cipherList)\" (\(errors()))")
        }
        if let suites = configuration.cipherSuites, SSL_CTX_set_ciphersuites(context, suites) != 1 {
            throw TLSConfigurationError(
                setting: .cipherSuites, file: nil, message: "no usable TLS 1.3 suite in \"\(suites)\" (\(errors()))")
        }
        guard portico_tls_ctx_set_groups(context, configuration.groups) == 1 else {
            throw TLSConfigurationError(setting: .groups, file: nil, message: "unknown group in \"\(configuration.groups)\" (\(errors()))")
        }
        switch configuration.clientCertificates {
        case .none:
            break
        case .optional(let caFile), .required(let caFile):
            try requireReadable(caFile, setting: .clientCA)
            let required: Int32 = if case .required = configuration.clientCertificates { 1 } else { 0 }
            guard portico_tls_ctx_verify_clients(context, caFile, required) == 1 else {
                throw TLSConfigurationError(setting: .clientCA, file: caFile, message: "not a PEM CA certificate file (\(errors()))")
            }
        }
    }

    private static func requireReadable(_ path: String, setting: TLSConfigurationError.Setting) throws(TLSConfigurationError) {
        guard access(path, R_OK) == 0 else {
            throw TLSConfigurationError(setting: setting, file: path, message: "cannot read the file: \(String(cString: strerror(errno)))")
        }
    }

    private static func errors() -> String {
        let messages = OpenSSLErrors.drain()
        return messages.isEmpty ? "no detail from OpenSSL" : messages.joined(separator: "; ")
    }
}

/// The SNI callback of a listener's default context: moves the handshake to the certificate that
/// is valid for the requested name; an unknown or absent name stays on the default.
private func selectCertificate(_ ssl: OpaquePointer?, _ alert: UnsafeMutablePointer<Int32>?, _ argument: UnsafeMutableRawPointer?) -> Int32
{
    guard let ssl, let argument, let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else { return SSL_TLSEXT_ERR_OK }
    let tls = Unmanaged<TLSContext>.fromOpaque(argument).takeUnretainedValue()
    if let context = tls.context(forServerName: name) {
        SSL_set_SSL_CTX(ssl, context)
    }
    return SSL_TLSEXT_ERR_OK
}
