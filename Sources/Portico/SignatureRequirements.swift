import PorticoPolicy
import PorticoSigning

/// The components a signature must cover (RFC 9421 §7.2.1: the verifier decides what a
/// signature has to protect), parsed from the policy once.
///
/// The policy's list applies to every request of every `auth: signature` service; three more
/// depend on the request itself: `@query` when it has a query, `content-digest` when it has a body,
/// and the client-version field (`clients.versionHeader`, `X-Client-Version` by default) when the
/// client sends one, since it decides which API version the request gets.
struct SignatureRequirements: Sendable {
    /// The policy's `signatures.requiredComponents`, in its order.
    let always: [ComponentIdentifier]
    /// The client-version field, as a component.
    let clientVersion: ComponentIdentifier
    /// Its name, for looking it up in a request's head.
    let clientVersionHeader: String

    static let contentDigest = ComponentIdentifier.field("content-digest")

    init(_ policy: SignaturePolicy, clientVersionHeader: String) {
        always = policy.requiredComponents.map { ComponentIdentifier($0) }
        clientVersion = .field(clientVersionHeader)
        self.clientVersionHeader = clientVersionHeader
    }

    /// The first required component `covered` lacks, in the order the policy's list and then the
    /// request-dependent ones come; `nil` when the signature covers them all.
    ///
    /// `covered` is a signature's short list, searched linearly: cheaper than hashing it into a set.
    func firstMissing(
        from covered: [ComponentIdentifier], hasQuery: Bool, hasBody: Bool, hasClientVersion: Bool
    ) -> ComponentIdentifier? {
        for component in always where !covered.contains(component) { return component }
        if hasQuery && !covered.contains(.query) { return .query }
        if hasBody && !covered.contains(Self.contentDigest) { return Self.contentDigest }
        if hasClientVersion && !covered.contains(clientVersion) { return clientVersion }
        return nil
    }
}
