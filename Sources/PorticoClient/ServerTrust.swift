import Crypto
import Foundation

/// Which servers' certificates a ``PorticoAPI`` accepts: the system's roots (the default), a
/// private CA's beside or instead of them, and optionally the public keys the server's certificate
/// must carry (pinning).
///
/// A staging gateway with an internal CA, or an app that pins its gateway's key, sets one trust and
/// both the API calls and the service locator's fetches honour it:
///
/// ```swift
/// let trust = try ServerTrust(
///     certificateAuthoritiesPEM: String(contentsOf: stagingCA, encoding: .utf8),
///     pinnedPublicKeys: ["sha256/2c7Qx1…="])
/// let api = PorticoAPI(locator: …, pinnedKey: …, keyID: …, secret: …, identity: …, trust: trust)
/// ```
///
/// How it is honoured:
/// - **Apple platforms**: by the delegate of the session the façade makes (`SecTrust` with these
///   anchors, then the pin check). An app that passes its own `session:` answers server-trust
///   challenges in its own delegate, and can call ``evaluate(_:)`` there.
/// - **Linux**: FoundationNetworking's `URLSession` never offers a server-trust challenge to its
///   delegate and has no CA setting, so with a trust other than ``system`` the façade sends through
///   libcurl itself (the copy FoundationNetworking already loaded): the CAs as `CURLOPT_CAINFO_BLOB`
///   (with the system bundle appended when ``trustsSystemRoots``), the pins as
///   `CURLOPT_PINNEDPUBLICKEY`, TLS 1.2 at least. A `session:` given as well is not used there.
///
/// Pins are SHA-256 digests of the server certificate's DER `SubjectPublicKeyInfo`, the form of
/// HPKP, OkHttp's `CertificatePinner` and curl's `sha256//`; ``publicKeyPin(ofCertificatePEM:)``
/// or `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256
/// -binary | base64` computes one. The pin is checked against the server's own certificate (the
/// leaf) after the chain verified, so a pinned key never stands in for a valid chain. Pin the
/// next key too before rotating, or the app stops reaching the gateway until it is updated.
public struct ServerTrust: Sendable, Hashable {
    /// Root certificates (DER) trusted beside, or instead of, the system's.
    public private(set) var certificateAuthorities: [Data]
    /// Whether the system's roots stay trusted beside ``certificateAuthorities``.
    public private(set) var trustsSystemRoots: Bool
    /// SHA-256 digests of public keys, one of which the server's certificate must carry; empty for
    /// no pinning.
    public private(set) var pinnedPublicKeys: [Data]

    /// The system's roots, as `URLSession` trusts them: nothing added, nothing pinned.
    public static let system = ServerTrust(uncheckedAuthorities: [], trustsSystemRoots: true, pins: [])

    private init(uncheckedAuthorities: [Data], trustsSystemRoots: Bool, pins: [Data]) {
        self.certificateAuthorities = uncheckedAuthorities
        self.trustsSystemRoots = trustsSystemRoots
        self.pinnedPublicKeys = pins
    }

    /// - Parameters:
    ///   - certificateAuthorities: DER root certificates to trust.
    ///   - trustsSystemRoots: `false` trusts only `certificateAuthorities` (then at least one is needed).
    ///   - pinnedPublicKeys: SHA-256 digests of `SubjectPublicKeyInfo`s, 32 bytes each.
    /// - Throws: ``ServerTrustError`` for a certificate that does not parse, a digest that is not 32
    ///   bytes, or a trust that would accept no server at all.
    public init(
        certificateAuthorities: [Data], trustsSystemRoots: Bool = true, pinnedPublicKeys: [Data] = []
    ) throws(ServerTrustError) {
        for (index, certificate) in certificateAuthorities.enumerated()
        where CertificateDER.subjectPublicKeyInfo(ofCertificate: certificate) == nil {
            throw .notACertificate(index: index)
        }
        if let bad = pinnedPublicKeys.first(where: { $0.count != 32 }) {
            throw .invalidPin(bad.base64EncodedString())
        }
        guard trustsSystemRoots || !certificateAuthorities.isEmpty else { throw .trustsNothing }
        self.init(uncheckedAuthorities: certificateAuthorities, trustsSystemRoots: trustsSystemRoots, pins: pinnedPublicKeys)
    }

    /// A trust from PEM text (one or more `CERTIFICATE` blocks, as a CA's `.pem` file holds them) and
    /// pins written `sha256/BASE64` (OkHttp's form), `sha256//BASE64` (curl's) or bare base64.
    public init(
        certificateAuthoritiesPEM pem: String? = nil, trustsSystemRoots: Bool = true, pinnedPublicKeys pins: [String] = []
    ) throws(ServerTrustError) {
        try self.init(
            certificateAuthorities: try pem.map(Self.certificates(fromPEM:)) ?? [], trustsSystemRoots: trustsSystemRoots,
            pinnedPublicKeys: try pins.map(Self.pinDigest(_:)))
    }

    /// Whether this is ``system``: the platform's own checks, untouched.
    public var isSystem: Bool { certificateAuthorities.isEmpty && pinnedPublicKeys.isEmpty && trustsSystemRoots }

    /// The pin (`sha256/BASE64`) of the first certificate in `pem`: what to give ``init(certificateAuthoritiesPEM:trustsSystemRoots:pinnedPublicKeys:)``
    /// to pin that certificate's key.
    public static func publicKeyPin(ofCertificatePEM pem: String) throws(ServerTrustError) -> String {
        guard let certificate = try certificates(fromPEM: pem).first,
            let key = CertificateDER.subjectPublicKeyInfo(ofCertificate: certificate)
        else { throw .notPEM }
        return "sha256/" + Data(SHA256.hash(data: key)).base64EncodedString()
    }

    /// Whether a server certificate (DER) carries one of the pinned keys; true when nothing is pinned.
    public func admitsPinned(certificate: Data) -> Bool {
        guard !pinnedPublicKeys.isEmpty else { return true }
        guard let key = CertificateDER.subjectPublicKeyInfo(ofCertificate: certificate) else { return false }
        return pinnedPublicKeys.contains(Data(SHA256.hash(data: key)))
    }

    /// The DER of each `CERTIFICATE` block in `pem`, in order.
    static func certificates(fromPEM pem: String) throws(ServerTrustError) -> [Data] {
        var certificates: [Data] = []
        var body: String?
        for line in pem.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----", let text = body {
                guard let der = Data(base64Encoded: text) else { throw .notPEM }
                guard CertificateDER.subjectPublicKeyInfo(ofCertificate: der) != nil else {
                    throw .notACertificate(index: certificates.count)
                }
                certificates.append(der)
                body = nil
            } else if body != nil {
                body! += line
            }
        }
        guard !certificates.isEmpty, body == nil else { throw .notPEM }
        return certificates
    }

    static func pinDigest(_ pin: String) throws(ServerTrustError) -> Data {
        let text = Substring(pin.trimmingCharacters(in: .whitespaces))
        // `/` is a base64 digit: `sha256//abc…` is curl's form of `abc…`, or OkHttp's form of a
        // digest whose base64 starts with `/`. Whichever reading gives a 32-byte digest is the pin
        // (both cannot: base64 of 32 bytes is 44 characters).
        for prefix in ["sha256/", "sha256//", ""] where text.hasPrefix(prefix) {
            if let digest = Data(base64Encoded: String(text.dropFirst(prefix.count))), digest.count == 32 { return digest }
        }
        throw .invalidPin(pin)
    }
}

/// Why a ``ServerTrust`` could not be made.
public enum ServerTrustError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text holds no complete `-----BEGIN CERTIFICATE-----` block, or one is not base64.
    case notPEM
    /// The certificate at this index is not a DER X.509 certificate with a public key.
    case notACertificate(index: Int)
    /// A pin that is not the base64 of a 32-byte SHA-256 digest.
    case invalidPin(String)
    /// `trustsSystemRoots: false` with no certificate authority: no server could be trusted.
    case trustsNothing

    public var description: String {
        switch self {
        case .notPEM: "no PEM certificate block could be read"
        case .notACertificate(let index): "certificate \(index) is not an X.509 certificate with a public key"
        case .invalidPin(let pin): "\"\(pin)\" is not a SHA-256 public-key pin (sha256/ and 44 base64 characters)"
        case .trustsNothing: "a trust without the system's roots needs at least one certificate authority"
        }
    }
}
