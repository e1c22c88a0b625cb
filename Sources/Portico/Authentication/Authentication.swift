import Foundation
import NIOHTTP1
import PorticoPolicy
import PorticoSigning

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
