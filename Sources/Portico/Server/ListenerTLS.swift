import PorticoPolicy
import PorticoTLS

/// Turns the policy's `tls` sections into OpenSSL contexts, and OpenSSL's objections into policy
/// diagnostics that name the file and key path.
public enum ListenerTLS {
    /// A context for every TLS listener of `snapshot`, by listener name. Every listener is tried, so
    /// one run reports every broken certificate. `replacing` (a reload) passes the contexts in use,
    /// whose session-ticket keys the new ones inherit.
    public static func contexts(
        for snapshot: PolicySnapshot, replacing current: [String: TLSContext] = [:]
    ) throws(PolicyError) -> [String: TLSContext] {
        var contexts: [String: TLSContext] = [:]
        var diagnostics: [PolicyDiagnostic] = []
        for listener in snapshot.listeners {
            guard let tls = listener.tls else { continue }
            do {
                var configuration = configuration(tls, protocols: listener.protocols)
                // A listener's protocols are fixed at start, like the rest of it: a reload's certificates
                // keep offering what the running listener's pipeline was built for.
                if let running = current[listener.name] {
                    configuration.applicationProtocols = running.configuration.applicationProtocols
                }
                contexts[listener.name] = try TLSContext(configuration: configuration, replacing: current[listener.name])
            } catch {
                diagnostics.append(diagnostic(for: error, in: tls))
            }
        }
        if !diagnostics.isEmpty { throw PolicyError(diagnostics: diagnostics) }
        return contexts
    }

    static func configuration(_ policy: ListenerTLSPolicy, protocols: [ListenerProtocol]) -> TLSConfiguration {
        var configuration = TLSConfiguration(
            certificates: policy.certificates.map { .init(certificateChain: $0.chain.path, privateKey: $0.privateKey.path) })
        configuration.applicationProtocols = Set(protocols.compactMap { TLSConfiguration.ApplicationProtocol(rawValue: $0.rawValue) })
        if configuration.applicationProtocols.isEmpty { configuration.applicationProtocols = [.http11] }
        configuration.minimumVersion = policy.minimumVersion == 13 ? .tls13 : .tls12
        if let ciphers = policy.ciphers { configuration.cipherList = ciphers }
        configuration.cipherSuites = policy.cipherSuites
        if let groups = policy.groups { configuration.groups = groups }
        if let ca = policy.clientCA?.path {
            switch policy.clientCertificates {
            case .none: configuration.clientCertificates = .none
            case .optional: configuration.clientCertificates = .optional(caFile: ca)
            case .required: configuration.clientCertificates = .required(caFile: ca)
            }
        }
        configuration.handshakeTimeout = policy.handshakeTimeout
        return configuration
    }

    static func diagnostic(for error: TLSConfigurationError, in policy: ListenerTLSPolicy) -> PolicyDiagnostic {
        let origin: PolicyOrigin
        switch error.setting {
        case .certificateChain(let index): origin = policy.certificates[index].chain.origin
        case .privateKey(let index): origin = policy.certificates[index].privateKey.origin
        case .clientCA: origin = policy.clientCA?.origin ?? policy.origin
        case .cipherList: origin = policy.origin.child("ciphers")
        case .cipherSuites: origin = policy.origin.child("cipherSuites")
        case .groups: origin = policy.origin.child("groups")
        case .context, .trustedCA: origin = policy.origin
        }
        return origin.diagnostic(error.description)
    }
}
