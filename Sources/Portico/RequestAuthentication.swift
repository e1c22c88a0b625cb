import Foundation
import NIOHTTP1
import PorticoPolicy
import PorticoSigning
import PorticoUpstream

/// A parsed request head seen through the signing module's eyes.
struct SignableRequestHead: SignableRequest {
    let head: HTTPRequestHead
    let scheme: String
    /// The `Host` field (RFC 9421 §2.2.3 takes `@authority` from it for HTTP/1.1).
    let authority: String
    /// Read from the head once: `@path`, `@query` and the required coverage each read them.
    let requestTarget: String
    let queryOffset: Int?

    init(head: HTTPRequestHead, scheme: String) {
        self.init(head: head, scheme: scheme, host: head.headers.first(name: "host"))
    }

    /// `host`: the `Host` field's value, already found (``SignatureHeadFields``).
    init(head: HTTPRequestHead, scheme: String, host: String?) {
        self.head = head
        self.scheme = scheme
        authority = host ?? ""
        requestTarget = head.uri
        queryOffset = Self.queryOffset(in: requestTarget)
    }

    var method: String { head.method.rawValue }
    func fieldValues(_ name: String) -> [String] { head.headers[name] }

    func onlyFieldValue(_ name: String) -> String? {
        // By index, reading a value only where the name matches (see ``SignatureHeadFields``).
        let headers = head.headers
        let length = name.utf8.count
        var found: HTTPHeaders.Index?
        for index in headers.indices where headers[index].name.utf8.count == length && HeaderName.matches(headers[index].name, name) {
            guard found == nil else { return nil }
            found = index
        }
        return found.map { headers[$0].value }
    }
}

/// The header fields a signature check reads, found in one pass over the head: looked up one by
/// one, they cost six scans of every field name and two arrays.
///
/// The pass notes where each field is and copies no value: a value is read where it is used.
/// (Holding them as strings cost a reference count each way per field, again for each copy of
/// this struct, and most of them are read once.)
struct SignatureHeadFields {
    private let headers: HTTPHeaders
    private var signatureInputAt: HTTPHeaders.Index?
    private var signatureAt: HTTPHeaders.Index?
    private var contentDigestAt: HTTPHeaders.Index?
    private var hostAt: HTTPHeaders.Index?
    /// Whether a signature field has more than one line (the lines are then joined).
    private var signatureInputRepeated = false
    private var signatureRepeated = false
    private(set) var hasClientVersion = false
    private(set) var hasClientPlatform = false

    /// `clientVersionHeader` and `clientPlatformHeader` are lowercase.
    ///
    /// The head is read by index, and a field's value only once its name matches: iterating the
    /// fields as (name, value) pairs copied every value (a reference count each way) just to
    /// compare names.
    init(_ headers: HTTPHeaders, clientVersionHeader: String, clientPlatformHeader: String) {
        self.headers = headers
        let versionLength = clientVersionHeader.utf8.count
        let platformLength = clientPlatformHeader.utf8.count
        for index in headers.indices {
            let name = headers[index].name
            // Told apart by length first: most fields match none of these names, and are then
            // passed over after one comparison of lengths instead of six of names.
            let length = name.utf8.count
            switch length {
            case 15 where HeaderName.matches(name, "signature-input"):
                if signatureInputAt == nil { signatureInputAt = index } else { signatureInputRepeated = true }
            case 9 where HeaderName.matches(name, "signature"):
                if signatureAt == nil { signatureAt = index } else { signatureRepeated = true }
            case 14 where HeaderName.matches(name, "content-digest"):
                if contentDigestAt == nil { contentDigestAt = index }
            case 4 where HeaderName.matches(name, "host"):
                if hostAt == nil { hostAt = index }
            default:
                break
            }
            // Apart from the names above: a policy may name any field for the client's identity,
            // even one of those, and it must then be covered all the same.
            if length == versionLength, HeaderName.matches(name, clientVersionHeader) { hasClientVersion = true }
            if length == platformLength, HeaderName.matches(name, clientPlatformHeader) { hasClientPlatform = true }
        }
    }

    /// `Signature-Input` and `Signature`, each field's lines joined with ", " (RFC 9110 §5.3).
    var signatureInput: String? { value(at: signatureInputAt, repeated: signatureInputRepeated, name: "signature-input") }
    var signature: String? { value(at: signatureAt, repeated: signatureRepeated, name: "signature") }
    /// The first `Content-Digest` line, checked against the body later.
    var contentDigest: String? { contentDigestAt.map { headers[$0].value } }
    /// The first `Host` line: `@authority`.
    var host: String? { hostAt.map { headers[$0].value } }

    private func value(at first: HTTPHeaders.Index?, repeated: Bool, name: String) -> String? {
        guard let first else { return nil }
        guard repeated else { return headers[first].value }
        return headers.filter { HeaderName.matches($0.name, name) }.map(\.value).joined(separator: ", ")
    }
}

/// Who a request was authenticated as, and what is still to check once its body has arrived.
struct Authentication {
    var keyID: String?
    /// The key's rate-limit tier, if it has one (read here, where the key was looked up anyway).
    var tier: String?
    /// The `Content-Digest` value to check against the whole body before anything is forwarded.
    var contentDigest: String?
    /// The signature's nonce, recorded by the rate-limit stage, or when a later stage refuses the request.
    var nonce: PendingNonce?
}

/// A verified signature's nonce, not yet recorded.
///
/// The rate-limit stage records it (in the key's share of the store), whether the key's limits
/// admit the request or refuse it; a request another stage refuses after authentication has it
/// recorded as it is answered (``GatewayHandler``). Either way a genuine request, once refused, can
/// never be admitted later: its nonce is recorded, or, where its key has no room left, the key's
/// refusal mark covers it (``NonceStore``).
struct PendingNonce {
    let keyID: String
    let nonce: String
    /// The signature's `created`, which a refusal mark is compared with.
    let created: Int64
    /// When the signature stops being acceptable, and so when the nonce may be forgotten.
    let expiry: Int64
    /// The key's share of the store.
    let quota: Int

    /// Records the nonce; a problem if it was recorded meanwhile (a replay racing the original) or
    /// there is no room for it (its key is then marked).
    func record(in store: any NonceStore, now: Int64) -> Problem? {
        Self.problem(for: store.insert(keyID: keyID, nonce: nonce, created: created, expiry: expiry, now: now, quota: quota))
    }

    /// The answer to a signature the store refuses, or nil when it took it.
    static func problem(for insertion: NonceInsertion) -> Problem? {
        switch insertion {
        case .inserted: nil
        case .replayed: .signatureReplayed()
        case .quotaExceeded(let retryAfter): .nonceQuotaExceeded(retryAfter: retryAfter)
        case .full(let retryAfter): .nonceStoreFull(retryAfter: retryAfter)
        }
    }
}

/// The authenticate stage: `none`, `apiKey` or `signature`, per service.
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

    func authenticate(_ head: HTTPRequestHead, service: ServicePolicy, hasBody: Bool, now: Int64) -> Result<Authentication, Problem> {
        switch service.auth {
        case .none: .success(Authentication())
        case .apiKey: apiKey(head, service: service, now: now)
        case .signature: signature(head, service: service, hasBody: hasBody, now: now)
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
        return .success(Authentication(keyID: credential.id, tier: credential.tier))
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
        return .success(Authentication(keyID: keyID, tier: credential.tier, contentDigest: contentDigest, nonce: pending))
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
