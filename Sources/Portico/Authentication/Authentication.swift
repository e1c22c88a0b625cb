import Foundation
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoSigning

/// Who a request was authenticated as, and what is still to check once its body has arrived.
struct Authentication {
    /// The scheme that admitted it.
    var scheme: AuthScheme?
    /// The policy key that signed or carried the request (never its secret); nil for a bearer token.
    var keyID: String?
    /// Whom a bearer token speaks for (`<issuer>:<sub>`), for the access log.
    var subject: String?
    /// The key's rate-limit tier, if it has one (read here, where the key was looked up anyway).
    var tier: String?
    /// The `Content-Digest` value to check against the whole body before anything is forwarded.
    var contentDigest: String?
    /// The SHA-256 the whole body must have (SigV4's `x-amz-content-sha256`), checked likewise.
    var payloadSHA256: [UInt8]?
    /// The signature's nonce, recorded by the rate-limit stage, or when a later stage refuses the request.
    var nonce: PendingNonce?
    /// Request fields the backend gets from the credentials (a token's `forwardClaims`).
    var forwardedFields: [(name: String, value: String)] = []
}

/// What one scheme made of a request.
enum SchemeOutcome {
    case success(Authentication)
    case failure(Problem)
    /// Look again once this completes: an issuer's keys are being fetched.
    case wait(EventLoopFuture<Void>)
    /// Look again once the whole body has arrived: the signature covers its hash, which the
    /// request does not state.
    case needsBody
}
