import Foundation

/// A way a service's callers may prove who they are. A service lists one or more
/// (``ServicePolicy/auth``); an empty list (`auth: none`) lets anyone call it.
public enum AuthScheme: String, Sendable, Hashable, CaseIterable {
    /// `X-API-Key: <key id>.<secret>`: simple, but the secret travels with every request.
    case apiKey
    /// An RFC 9421 HMAC signature: the secret never travels, and the request cannot be altered.
    case signature
    /// An OAuth/OIDC bearer token (a JWS) from one of the policy's `jwt.issuers`, checked against
    /// the issuer's published keys.
    case jwt
    /// AWS Signature Version 4 (`Authorization: AWS4-HMAC-SHA256 …` or a presigned URL), by a key
    /// with an `accessKeyId`.
    case sigv4
}

/// How signatures are checked, for every service with `auth: signature`.
public struct SignaturePolicy: Sendable, Hashable {
    /// How far `created` may be from the gateway's clock, either way.
    public var maxClockSkew: Duration = .seconds(300)
    /// Whether every signature must carry a `nonce` (replay protection within the skew window).
    public var requireNonce: Bool = true
    /// The `Signature-Input` label to verify; `nil` takes the first one.
    public var label: String?
    /// Components every signature must cover. The request-dependent ones are added on top: `@query`
    /// when there is a query, `content-digest` when there is a body, `x-client-version` when sent.
    public var requiredComponents: [String] = ["@method", "@authority", "@path"]
    /// Most (key, nonce) pairs remembered at once. When full, new signed requests get 503 rather
    /// than an old nonce being forgotten while its signature could still be replayed.
    public var nonceCacheSize: Int = 100_000
    /// The share of the nonce store a key without a rate-limit tier may hold; `nil` is a tenth of
    /// ``nonceCacheSize``. (A tier's keys get the tier's `nonceQuota`, or what its rate allows.)
    public var defaultNonceQuota: Int?
    /// The most components one signature may cover; a signature covering more is refused (401)
    /// before any signature base is built. Real signers cover about ten.
    public var maxComponents: Int = 32
    /// The longest signature base the gateway builds, in bytes; a longer one is refused (401)
    /// before any MAC is computed. It bounds the MACs' work whatever the components repeat. At
    /// least 1 KiB.
    public var maxBaseBytes: Int = 8 * 1024

    /// How long a nonce may have to be remembered after it was recorded: a signature is accepted
    /// while `created` is within the skew of the gateway's clock either way, so its nonce is kept
    /// until `created + skew + 1`, at most `2 × skew + 1` seconds after it arrived.
    public var nonceLifetimeSeconds: Int64 { 2 * maxClockSkew.components.seconds + 1 }
}

/// Settings of key-only authentication.
public struct APIKeyPolicy: Sendable, Hashable {
    /// The request header carrying `<key id>.<secret>`.
    public var header: String = "X-API-Key"
}

/// A secret shared with one client app. Its text is the HMAC key (its UTF-8 bytes).
///
/// `description` never shows the bytes, so a secret printed by mistake (a log line, a test
/// failure, `portico check`) reveals nothing.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let bytes: [UInt8]

    public init(_ text: String) { bytes = Array(text.utf8) }
    public init(bytes: [UInt8]) { self.bytes = bytes }

    public var description: String { "<secret: \(bytes.count) bytes>" }
    public var debugDescription: String { description }
    /// `dump` and `Mirror` see the length only, as the description does.
    public var customMirror: Mirror { Mirror(self, children: ["bytes": bytes.count], displayStyle: .struct) }

    /// Why a secret file was not read.
    public enum FileProblem: Error, Sendable, Equatable, CustomStringConvertible {
        /// Missing, or its directory is not readable.
        case cannotOpen
        case unreadable
        /// A device, FIFO or directory: reading `/dev/zero` or a pipe nobody writes would never end.
        case notRegularFile
        case tooLarge(bytes: Int)

        public var description: String {
            switch self {
            case .cannotOpen: "does not exist or cannot be opened"
            case .unreadable: "cannot be read as UTF-8 text"
            case .notRegularFile: "is not a regular file"
            case .tooLarge(let bytes): "holds \(bytes) bytes, more than a secret needs (at most \(Secret.maxFileBytes))"
            }
        }
    }

    /// The largest secret file read; a secret is a few dozen bytes.
    public static let maxFileBytes = 64 * 1024

    /// A secret file's text without its trailing line breaks (editors and `echo` add one), as the
    /// gateway and the command-line tools both read it; nil when ``read(file:)`` refuses it.
    public static func text(ofFile path: String) -> String? {
        try? read(file: path).get()
    }

    /// Reads a secret file: a regular file (symbolic links followed, as mounted secrets use them)
    /// of at most ``maxFileBytes``, as UTF-8 text without its trailing line breaks. Anything else
    /// is refused before a byte is read, so a policy naming a device or a FIFO cannot hang a load.
    public static func read(file path: String) -> Result<String, FileProblem> {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: resolved) else { return .failure(.cannotOpen) }
        guard attributes[.type] as? FileAttributeType == .typeRegular else { return .failure(.notRegularFile) }
        let size = (attributes[.size] as? NSNumber)?.intValue ?? 0
        guard size <= maxFileBytes else { return .failure(.tooLarge(bytes: size)) }
        guard let contents = try? String(contentsOfFile: resolved, encoding: .utf8) else { return .failure(.unreadable) }
        var text = Substring(contents)
        while let last = text.last, last == "\n" || last == "\r\n" || last == "\r" { text.removeLast() }
        return .success(String(text))
    }
}

/// A client app's API key.
public struct ClientKeyPolicy: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable {
        case active, revoked
    }

    public var id: String
    public var secret: Secret
    /// The secret being rotated out, accepted until `previousSecretExpires` (seconds since 1970).
    public var previousSecret: Secret?
    public var previousSecretExpires: Int64?
    public var status: Status
    /// Service names this key may call; `["*"]` allows every service.
    public var services: [String]
    /// Rate-limit tier name.
    public var tier: String?
    /// A demo key: its secret is published with the policy, so it must never guard real traffic.
    public var demo: Bool
    /// Which client addresses may use it (`allowFrom`, `denyFrom`): a stolen key is no use elsewhere.
    public var addresses = AddressList()
    /// The AWS-style access key id this key signs SigV4 requests as (its secret is the secret
    /// access key); nil for a key that does not speak SigV4.
    public var accessKeyID: String?

    public func mayCall(service: String) -> Bool {
        services.contains("*") || services.contains(service)
    }
}
