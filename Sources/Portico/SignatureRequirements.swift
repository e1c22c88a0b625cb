import PorticoPolicy
import PorticoSigning

/// The components a signature must cover (RFC 9421 §7.2.1: the verifier decides what a
/// signature has to protect), parsed from the policy once.
///
/// The policy's list applies to every request of every `auth: signature` service; three more
/// depend on the request itself: `@query` when it has a query, `content-digest` when it has a body,
/// and the client's identity fields (`clients.versionHeader` and `clients.platformHeader`,
/// `X-Client-Version` and `X-Client-Platform` by default) when the client sends them, since they
/// decide which API version the request gets. (The client library always covers both.)
struct SignatureRequirements: Sendable {
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

    init(_ policy: SignaturePolicy, clientVersionHeader: String, clientPlatformHeader: String) {
        always = policy.requiredComponents.map { ComponentIdentifier($0) }
        clientVersion = .field(clientVersionHeader)
        self.clientVersionHeader = clientVersionHeader.lowercased()
        clientPlatform = .field(clientPlatformHeader)
        self.clientPlatformHeader = clientPlatformHeader.lowercased()
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
