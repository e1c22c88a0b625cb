import Foundation

/// The issuers whose bearer tokens services may take (`jwt: { issuers: { NAME: … } }`).
public struct JWTPolicy: Sendable, Hashable {
    public var issuers: [String: JWTIssuerPolicy] = [:]

    public init() {}
}

/// The JWS algorithms a token may be signed with. All are asymmetric: the gateway holds public
/// keys only, so `none` and the HMAC algorithms (whose "key" would be the public key itself, the
/// classic confusion) do not exist here.
public enum JWTAlgorithmName: String, Sendable, Hashable, CaseIterable {
    case rs256 = "RS256"
    case rs384 = "RS384"
    case rs512 = "RS512"
    case ps256 = "PS256"
    case ps384 = "PS384"
    case ps512 = "PS512"
    case es256 = "ES256"
    case es384 = "ES384"
    case es512 = "ES512"
    case eddsa = "EdDSA"

    /// The JWK key type (`kty`) a key for this algorithm has.
    public var keyType: String {
        switch self {
        case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512: "RSA"
        case .es256, .es384, .es512: "EC"
        case .eddsa: "OKP"
        }
    }
}

/// One token issuer: who it is, where its keys are, and what its tokens must say.
public struct JWTIssuerPolicy: Sendable, Hashable {
    /// Where the issuer's public keys (a JWK Set, RFC 7517) come from.
    public enum KeySource: Sendable, Hashable {
        /// Fetched (off the event loop) and refreshed as the response's `Cache-Control` says.
        case url(String)
        /// A JWK Set in a file, read with the policy (and again at each reload).
        case file(path: String, contents: String)
    }

    public var name: String
    /// The exact `iss` every token must carry.
    public var issuer: String
    public var keys: KeySource
    /// `aud` must name at least one of these; empty accepts any audience (refused at load unless
    /// said on purpose with `audiences: ["*"]`).
    public var audiences: [String]
    public var algorithms: [JWTAlgorithmName]
    /// How far `exp`, `nbf` and `iat` may be off the gateway's clock.
    public var clockSkew: Duration = .seconds(60)
    /// Claims every token must carry (by default `exp`: a token that never expires is refused).
    public var requiredClaims: [String] = ["exp"]
    /// The least time between two fetches that an unknown `kid` causes: a rotated key is picked
    /// up at once, a flood of made-up `kid`s costs the issuer one fetch per cooldown.
    public var refetchCooldown: Duration = .seconds(30)
    /// How long a fetched set is used when its response gives no `max-age`; a response's own
    /// lifetime is held between ``minimumRefresh`` and a day.
    public var defaultRefresh: Duration = .seconds(300)
    public var minimumRefresh: Duration = .seconds(30)
    /// For an `https://` JWKS URL: the CA certificates (PEM) its certificate must chain to.
    public var caFile: PolicyFile?
    /// The longest token read (the whole compact JWS); a longer one is refused before any decoding.
    public var maxTokenBytes: Int = 8 * 1024

    public init(name: String, issuer: String, keys: KeySource, audiences: [String], algorithms: [JWTAlgorithmName]) {
        self.name = name
        self.issuer = issuer
        self.keys = keys
        self.audiences = audiences
        self.algorithms = algorithms
    }
}

/// What one service asks of a bearer token (`services.NAME.jwt`).
public struct ServiceJWTPolicy: Sendable, Hashable {
    /// The issuers (names in `jwt.issuers`) whose tokens this service takes.
    public var issuers: [String]
    /// Scopes the token must grant, every one of them (from `scope`, space-separated, or `scp`).
    public var scopes: [String] = []
    /// Claims the token must carry with one of the listed values (a list claim: one of its items).
    public var claims: [String: [String]] = [:]
    /// Claims passed to the backend as request fields (`sub: X-User-Id`). The fields are always
    /// removed from what the client sent, so that no caller can set them itself.
    public var forwardClaims: [(claim: String, field: String)] = []

    public init(issuers: [String]) {
        self.issuers = issuers
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.issuers == rhs.issuers && lhs.scopes == rhs.scopes && lhs.claims == rhs.claims
            && lhs.forwardClaims.elementsEqual(rhs.forwardClaims) { $0.claim == $1.claim && $0.field == $1.field }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(issuers)
        hasher.combine(scopes)
        hasher.combine(claims)
        for pair in forwardClaims {
            hasher.combine(pair.claim)
            hasher.combine(pair.field)
        }
    }
}

/// The scope SigV4 signatures to one service are made for (`services.NAME.sigv4`).
public struct ServiceSigV4Policy: Sendable, Hashable {
    /// The credential scope's region and service (`…/20261126/eu-west-1/reports/aws4_request`).
    public var region: String
    public var service: String
    /// Whether `x-amz-content-sha256: UNSIGNED-PAYLOAD` is accepted: the body is then not
    /// covered by the signature at all. Off by default.
    public var allowUnsignedPayload: Bool = false
    /// How far `x-amz-date` may be off the gateway's clock, either way (AWS allows 15 minutes).
    public var clockSkew: Duration = .seconds(300)
    /// The longest `X-Amz-Expires` a presigned URL may give (AWS's own limit: 7 days).
    public var maxExpires: Duration = .seconds(7 * 24 * 3600)

    public init(region: String, service: String) {
        self.region = region
        self.service = service
    }

    /// S3 signs the path as sent; every other AWS service normalises it and encodes it twice
    /// (botocore and the AWS documentation agree), so a service named `s3` is checked S3's way.
    public var encodesPathOnce: Bool { service == "s3" }
}
