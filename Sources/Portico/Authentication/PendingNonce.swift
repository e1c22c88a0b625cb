import Foundation
import NIOHTTP1
import PorticoPolicy
import PorticoSigning

/// A verified signature's nonce, not yet recorded.
///
/// The rate-limit stage records it (in the key's share of the store, through the ``LimitStore``),
/// whether the key's limits admit the request or refuse it; a request another stage refuses after
/// authentication has it recorded as it is answered (``GatewayHandler/stagesFinished(_:answer:)``).
/// Either way a genuine request, once refused, can never be admitted later: its nonce is
/// recorded, or, where its key has no room left, the key's refusal mark covers it (``NonceStore``).
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
