#if canImport(Security)
import Foundation
import Security

extension ServerTrust {
    /// Evaluates a server's `SecTrust` as this setting says: the chain against the system's roots
    /// and ``certificateAuthorities`` (or those alone), for the host the trust was made for, then
    /// the pins against the server's certificate. For an app's own session delegate:
    ///
    /// ```swift
    /// if let serverTrust = challenge.protectionSpace.serverTrust {
    ///     return trust.evaluate(serverTrust) ? (.useCredential, URLCredential(trust: serverTrust)) : (.cancelAuthenticationChallenge, nil)
    /// }
    /// ```
    public func evaluate(_ serverTrust: SecTrust) -> Bool {
        if !certificateAuthorities.isEmpty {
            let anchors = certificateAuthorities.compactMap { SecCertificateCreateWithData(nil, $0 as CFData) }
            guard SecTrustSetAnchorCertificates(serverTrust, anchors as CFArray) == errSecSuccess,
                SecTrustSetAnchorCertificatesOnly(serverTrust, !trustsSystemRoots) == errSecSuccess
            else { return false }
        }
        guard SecTrustEvaluateWithError(serverTrust, nil) else { return false }
        guard !pinnedPublicKeys.isEmpty else { return true }
        guard let chain = SecTrustCopyCertificateChain(serverTrust) as? [SecCertificate], let leaf = chain.first else { return false }
        return admitsPinned(certificate: SecCertificateCopyData(leaf) as Data)
    }
}

/// Answers the server-trust challenges of the session a façade makes, by its ``ServerTrust``; every
/// other challenge gets the system's handling.
final class ServerTrustDelegate: NSObject, URLSessionDelegate, Sendable {
    let trust: ServerTrust

    init(trust: ServerTrust) { self.trust = trust }

    func urlSession(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge
    ) async -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
            let serverTrust = challenge.protectionSpace.serverTrust
        else { return (.performDefaultHandling, nil) }
        return trust.evaluate(serverTrust) ? (.useCredential, URLCredential(trust: serverTrust)) : (.cancelAuthenticationChallenge, nil)
    }
}
#endif
