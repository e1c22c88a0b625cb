import PorticoPolicy
import PorticoSigning

/// The components a signature must cover (RFC 9421 §7.2.1: the verifier decides what a
/// signature has to protect), parsed from the policy once.
///
/// The policy's list applies to every request of every `auth: signature` service; three more
/// depend on the request itself: `@query` when it has a query, `content-digest` when it has a body,
/// and the client's identity fields (`clients.versionHeader` and `clients.platformHeader`,
/// `X-Client-Version` and `X-Client-Platform` by default) when the client sends them, since they
/// decide which API version the request gets. (The client library always covers both.) The rest
/// of what the policy asks of a signature (label, clock skew, nonce) is read from here too.
///
/// A class: the authenticate stage reads it for every signed request, and a struct stored in the
/// compiled policy was copied out whole (each of its strings and arrays retained) for each read.
final class SignatureRequirements: Sendable {
    /// The `Signature-Input` label to verify; `nil` takes the first.
    let label: String?
    /// How far `created` may be from the gateway's clock, either way, in seconds.
    let maxClockSkew: Int64
    let requireNonce: Bool
    /// The most components a signature may cover, and the longest base built for one.
    let maxComponents: Int
    let maxBaseBytes: Int
    /// The policy's `signatures.requiredComponents`, in its order.
    let always: [ComponentIdentifier]
    /// The client-version field, as a component.
    let clientVersion: ComponentIdentifier
    /// Its name, lowercased, for looking it up in a request's head.
    let clientVersionHeader: String
    /// The client-platform field, as a component, and its name (lowercased).
    let clientPlatform: ComponentIdentifier
    let clientPlatformHeader: String

    static let contentDigest = ComponentIdentifier.field("content-digest")

    /// The policy's list as a ``SignatureView`` holds components: derived ones as bits, fields by
    /// name. Nil when the list names one a view never holds (one with parameters, `@query-param`),
    /// which then always takes the general path.
    private let alwaysInView: (derived: UInt16, fields: [String])?
    private static let queryBit = SignatureView.bit(ofDerived: "@query")!

    init(_ policy: SignaturePolicy, clientVersionHeader: String, clientPlatformHeader: String) {
        label = policy.label
        maxClockSkew = policy.maxClockSkew.components.seconds
        requireNonce = policy.requireNonce
        maxComponents = policy.maxComponents
        maxBaseBytes = policy.maxBaseBytes
        always = policy.requiredComponents.map { ComponentIdentifier($0) }
        clientVersion = .field(clientVersionHeader)
        self.clientVersionHeader = clientVersionHeader.lowercased()
        clientPlatform = .field(clientPlatformHeader)
        self.clientPlatformHeader = clientPlatformHeader.lowercased()
        var derived: UInt16 = 0
        var fields: [String] = []
        var expressible = true
        for component in always {
            if !component.parameters.isEmpty {
                expressible = false
            } else if component.isDerived {
                guard let bit = SignatureView.bit(ofDerived: component.name) else {
                    expressible = false
                    continue
                }
                derived |= bit
            } else {
                fields.append(component.name)
            }
        }
        alwaysInView = expressible ? (derived, fields) : nil
    }

    /// Whether `view` covers everything ``firstMissing(from:hasQuery:hasBody:hasClientVersion:hasClientPlatform:)``
    /// asks for. False sends the request to the general path, which names what is missing.
    func isCovered(by view: borrowing SignatureView, hasQuery: Bool, hasBody: Bool, hasClientVersion: Bool, hasClientPlatform: Bool) -> Bool
    {
        guard let alwaysInView else { return false }
        let derived = alwaysInView.derived | (hasQuery ? Self.queryBit : 0)
        guard view.derivedComponents & derived == derived else { return false }
        for field in alwaysInView.fields where !view.coversField(field) { return false }
        if hasBody && !view.coversField(Self.contentDigest.name) { return false }
        if hasClientVersion && !view.coversField(clientVersion.name) { return false }
        if hasClientPlatform && !view.coversField(clientPlatform.name) { return false }
        return true
    }

    /// The first required component `covered` lacks, in the order the policy's list and then the
    /// request-dependent ones come; `nil` when the signature covers them all.
    ///
    /// `covered` is a signature's short list, searched linearly: cheaper than hashing it into a set.
    func firstMissing(
        from covered: [ComponentIdentifier], hasQuery: Bool, hasBody: Bool, hasClientVersion: Bool, hasClientPlatform: Bool = false
    ) -> ComponentIdentifier? {
        for component in always where !covered.contains(component) { return component }
        if hasQuery && !covered.contains(.query) { return .query }
        if hasBody && !covered.contains(Self.contentDigest) { return Self.contentDigest }
        if hasClientVersion && !covered.contains(clientVersion) { return clientVersion }
        if hasClientPlatform && !covered.contains(clientPlatform) { return clientPlatform }
        return nil
    }
}
