import Foundation
import NIOHTTP1
import PorticoPolicy
import PorticoSigning

/// The API-key and RFC 9421 signature schemes (the bearer-token and SigV4 ones are
/// ``BearerAuthenticator`` and ``SigV4Authenticator``).
///
/// Everything is decided from the head, before a body is read: a request that cannot be
/// authenticated costs no buffering. Answers help an honest client (which component is missing,
/// how far its clock is off) and never reveal whether a key id exists.
struct RequestAuthenticator {
    /// The policy's keys, signature settings and required coverage, compiled.
    let compiled: CompiledPolicy
    let nonces: any NonceStore
    let scheme: String

    init(_ compiled: CompiledPolicy, nonces: any NonceStore, scheme: String) {
        self.compiled = compiled
        self.nonces = nonces
        self.scheme = scheme
    }

    private var credentials: Credentials { compiled.credentials }

    /// Longest nonce accepted; nonces are remembered, so their size is bounded.
    static let maxNonceLength = 256

    /// `scheme` is `.apiKey` or `.signature`.
    func authenticate(
        _ head: HTTPRequestHead, scheme: AuthScheme, service: ServicePolicy, hasBody: Bool, now: Int64
    ) -> Result<Authentication, Problem> {
        switch scheme {
        case .apiKey: apiKey(head, service: service, now: now)
        default: signature(head, service: service, hasBody: hasBody, now: now)
        }
    }

    // MARK: API keys

    private func apiKey(_ head: HTTPRequestHead, service: ServicePolicy, now: Int64) -> Result<Authentication, Problem> {
        let header = compiled.snapshot.policy.apiKeys.header
        guard let presented = head.headers.first(name: header) else { return .failure(.apiKeyRequired(header: header)) }
        let (id, secret) = Self.splitAPIKey(presented)
        let credential = credentials.byID[id]
        let fingerprint = Credentials.fingerprint(secret)
        // Both comparisons always run, against decoys for what the key lacks (or for an unknown id).
        let previous = credential?.previous
        let matchesCurrent = ConstantTime.equal(fingerprint, credential?.fingerprint ?? credentials.decoyFingerprint)
        let matchesPrevious = ConstantTime.equal(fingerprint, previous?.fingerprint ?? credentials.secondDecoyFingerprint)
        let previousCounts = previous.map { now < $0.expires } ?? false
        guard let credential, matchesCurrent || (matchesPrevious && previousCounts) else { return .failure(.apiKeyInvalid(header: header)) }
        if let refusal = Self.authorize(credential, service: service) { return .failure(refusal) }
        return .success(Authentication(scheme: .apiKey, keyID: credential.id, tier: credential.tier))
    }

    /// `<key id>.<secret>`; key ids cannot contain '.', so the first one separates them.
    static func splitAPIKey(_ value: String) -> (id: String, secret: Substring) {
        guard let dot = value.firstIndex(of: ".") else { return ("", value[...]) }
        return (String(value[..<dot]), value[value.index(after: dot)...])
    }

    // MARK: Signatures

    private func signature(_ head: HTTPRequestHead, service: ServicePolicy, hasBody: Bool, now: Int64) -> Result<Authentication, Problem> {
        let requirements = compiled.signatureRequirements
        let fields = SignatureHeadFields(
            head.headers, clientVersionHeader: requirements.clientVersionHeader, clientPlatformHeader: requirements.clientPlatformHeader)
        guard let signatureInputValue = fields.signatureInput, let signatureValue = fields.signature else {
            if fields.signatureInput == nil && fields.signature == nil { return .failure(.signatureRequired()) }
            return .failure(.malformedSignature("Send both Signature-Input and Signature; only one of them is present."))
        }
        var view = SignatureView(signatureInput: signatureInputValue)
        if view.read(label: requirements.label, signature: signatureValue),
            let outcome = inPlaceSignature(
                view, requirements: requirements, head: head, fields: fields, service: service, hasBody: hasBody, now: now)
        {
            return outcome
        }
        let signature: SignatureFields.Signature
        do {
            signature = try SignatureFields.select(
                label: requirements.label, signatureInput: signatureInputValue, signature: signatureValue,
                maxComponents: requirements.maxComponents)
        } catch {
            return .failure(Self.problem(for: error))
        }
        let input = signature.input

        // The parameters and the coverage every signature needs, before any key is looked at.
        let keyID: String
        let created: Int64
        switch Self.requiredParameters(keyID: input.keyID, created: input.created, nonce: input.nonce, requirements: requirements) {
        case .success(let parameters): (keyID, created) = parameters
        case .failure(let problem): return .failure(problem)
        }
        let request = SignableRequestHead(head: head, scheme: scheme, host: fields.host)
        if let missing = requirements.firstMissing(
            from: input.components, hasQuery: request.queryOffset != nil, hasBody: hasBody,
            hasClientVersion: fields.hasClientVersion, hasClientPlatform: fields.hasClientPlatform)
        {
            return .failure(.signatureIncomplete("The signature must cover \(missing); it covers \(Self.list(input.components))."))
        }
        if let problem = Self.windowProblem(created: created, expires: input.expires, now: now, requirements: requirements) {
            return .failure(problem)
        }

        // The MACs: the current secret and the previous one (or stand-ins), always both.
        let candidates = credentials.candidates(for: keyID, now: now)
        let verified: Bool
        do {
            let matches = try MessageSignature.verify(
                signature, request: request, candidates: candidates.first, candidates.second, maxBaseBytes: requirements.maxBaseBytes)
            verified = matches.first || (matches.second && candidates.secondCounts)
        } catch {
            return .failure(Self.problem(for: error))
        }
        return verdict(
            verified, credential: candidates.credential, keyID: keyID, created: created, expires: input.expires, nonce: input.nonce,
            maxClockSkew: requirements.maxClockSkew, service: service, contentDigest: fields.contentDigest, now: now)
    }

    /// The checks above on a signature read in place (``SignatureView``), in the same order and
    /// with the same MACs. Nil hands the request to the general reading: every refusal but a MAC
    /// that does not match is left to it, and it words them. Nearly every genuine signature is
    /// decided here.
    private func inPlaceSignature(
        _ view: borrowing SignatureView, requirements: SignatureRequirements, head: HTTPRequestHead, fields: SignatureHeadFields,
        service: ServicePolicy, hasBody: Bool, now: Int64
    ) -> Result<Authentication, Problem>? {
        guard view.componentCount <= requirements.maxComponents,
            case .success(let (keyID, created)) = Self.requiredParameters(
                keyID: view.keyID, created: view.created, nonce: view.nonce, requirements: requirements)
        else { return nil }
        let request = SignableRequestHead(head: head, scheme: scheme, host: fields.host)
        guard
            requirements.isCovered(
                by: view, hasQuery: request.queryOffset != nil, hasBody: hasBody, hasClientVersion: fields.hasClientVersion,
                hasClientPlatform: fields.hasClientPlatform),
            Self.windowProblem(created: created, expires: view.expires, now: now, requirements: requirements) == nil
        else { return nil }
        let candidates = credentials.candidates(for: keyID, now: now)
        guard let matches = view.verify(request: request, candidates: candidates.first, candidates.second) else { return nil }
        return verdict(
            matches.first || (matches.second && candidates.secondCounts), credential: candidates.credential, keyID: keyID,
            created: created, expires: view.expires, nonce: view.nonce, maxClockSkew: requirements.maxClockSkew, service: service,
            contentDigest: fields.contentDigest, now: now)
    }

    /// The parameters every signature needs, checked the same way whichever reading found them:
    /// `keyid` and `created`, a nonce where the policy requires one, and no nonce too long to keep.
    private static func requiredParameters(
        keyID: String?, created: Int64?, nonce: String?, requirements: SignatureRequirements
    ) -> Result<(keyID: String, created: Int64), Problem> {
        guard let keyID else { return .failure(.signatureIncomplete("The signature parameters must include keyid.")) }
        guard let created else { return .failure(.signatureIncomplete("The signature parameters must include created.")) }
        if requirements.requireNonce && nonce == nil {
            return .failure(.signatureIncomplete("The signature parameters must include a nonce (a fresh random value per request)."))
        }
        if let nonce, nonce.utf8.count > maxNonceLength {
            return .failure(.malformedSignature("The nonce is longer than \(maxNonceLength) characters."))
        }
        return .success((keyID, created))
    }

    /// The time window: `created` within the allowed skew, `expires` (if given) still ahead.
    private static func windowProblem(created: Int64, expires: Int64?, now: Int64, requirements: SignatureRequirements) -> Problem? {
        let skew = requirements.maxClockSkew
        if abs(now - created) > skew { return .clockSkew(created: created, now: now, allowed: skew) }
        if let expires, expires <= now { return .signatureExpired(expires: expires, now: now) }
        return nil
    }

    /// What follows the MACs, whichever reading computed them.
    private func verdict(
        _ verified: Bool, credential: Credentials.Credential?, keyID: String, created: Int64, expires: Int64?, nonce: String?,
        maxClockSkew: Int64, service: ServicePolicy, contentDigest: String?, now: Int64
    ) -> Result<Authentication, Problem> {
        guard verified, let credential else { return .failure(.signatureInvalid()) }
        if let refusal = Self.authorize(credential, service: service) { return .failure(refusal) }

        // Only a genuine signature is looked up, and its nonce is recorded after the rate limit, so
        // neither forgeries nor a key over its limit take room in the store. A replay is refused
        // here, before it can draw from the key's rate limit.
        var pending: PendingNonce?
        if let nonce {
            if let refusal = nonces.check(keyID: keyID, nonce: nonce, created: created, now: now).flatMap(PendingNonce.problem) {
                return .failure(refusal)
            }
            var expiry = created + maxClockSkew + 1
            if let expires { expiry = min(expiry, expires) }
            pending = PendingNonce(keyID: keyID, nonce: nonce, created: created, expiry: expiry, quota: credential.nonceQuota)
        }
        return .success(
            Authentication(scheme: .signature, keyID: keyID, tier: credential.tier, contentDigest: contentDigest, nonce: pending))
    }

    // MARK: Shared

    /// A key proven genuine may still be refused: revoked, or not allowed to call this service.
    static func authorize(_ key: Credentials.Credential, service: ServicePolicy) -> Problem? {
        if key.isRevoked { return .keyRevoked() }
        if !key.mayCall(service: service.name) { return .keyNotAllowed(service: service.name) }
        return nil
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    private static func list(_ components: [ComponentIdentifier]) -> String {
        components.isEmpty ? "nothing" : components.map(\.description).joined(separator: " ")
    }

    /// The answer to a signature the signing module refused: too much work asked for is named by
    /// its limit (`signature-too-large`); anything else is malformed, in the module's words.
    private static func problem(for error: SigningError) -> Problem {
        switch error {
        case .tooManyComponents(let limit):
            .signatureTooLarge(
                limit: "maxComponents", value: limit,
                detail: "The signature covers more than \(limit) components, the most this gateway verifies (signatures.maxComponents).")
        case .baseTooLarge(let limit):
            .signatureTooLarge(
                limit: "maxBaseBytes", value: limit,
                detail: "The signature base would be longer than \(limit) bytes, the most this gateway builds (signatures.maxBaseBytes).")
        default:
            .malformedSignature(sentence(error.description))
        }
    }

    private static func sentence(_ text: String) -> String {
        text.prefix(1).uppercased() + text.dropFirst() + "."
    }
}
