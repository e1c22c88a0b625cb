/// When one issuer's keys are fetched, and what a token's `kid` gets meanwhile: a state machine
/// over the clock it is given (seconds since 1970), returning what to do. ``IssuerKeys`` runs it
/// under its lock and carries the decisions out.
///
/// - A set that was never loaded is loaded at the first token; tokens wait for it. If the load
///   fails they get 503 (the issuer is unreachable, so no verdict on the token is possible), and
///   the next attempt waits ``retryInterval``.
/// - A loaded set is used while the issuer is down: expiry (the response's `max-age`) starts a
///   refresh in the background, and the old keys serve until it succeeds.
/// - An unknown `kid` fetches at once — a key rotated in a moment ago works at its first token —
///   but at most once per `cooldown`, so made-up `kid`s cost the issuer one fetch per cooldown.
struct IssuerKeyState<Key: Sendable>: Sendable {
    /// nil until the first load succeeds.
    private(set) var keys: [String: Key]?
    private(set) var loading = false
    /// When the loaded set should be fetched again.
    private(set) var refreshAt: Int64 = 0
    /// Counts the changes of the set: a load that brings other keys (or other key material) than
    /// the set in hand moves it on, and with it every verification made with the old set lapses.
    private(set) var generation = 0
    private var fingerprint: String?
    private var lastFailure: Int64?
    private var lastUnknownKeyFetch: Int64?

    let cooldown: Int64
    /// The least time between two attempts after a failed one.
    let retryInterval: Int64

    init(cooldown: Int64, retryInterval: Int64 = 5) {
        self.cooldown = cooldown
        self.retryInterval = retryInterval
    }

    enum Decision {
        /// Verify with this key; `refresh`: start a background load as well.
        case use(Key, refresh: Bool)
        /// No key has this `kid`, and no fetch may be made for it now.
        case unknownKey
        /// No set has ever been loaded, and none can be had now.
        case unavailable(retryAfter: Int64)
        /// A load is under way (or `startLoad` was just decided): wait for it, then look again.
        case wait(startLoad: Bool)
    }

    /// What a token naming `kid` gets at `now`; `mayWait` is false for a token that has already
    /// waited for one load (it never waits twice).
    mutating func lookup(kid: String?, now: Int64, mayWait: Bool) -> Decision {
        guard let keys else {
            if loading { return mayWait ? .wait(startLoad: false) : .unavailable(retryAfter: retryInterval) }
            if let lastFailure, now < lastFailure + retryInterval {
                return .unavailable(retryAfter: lastFailure + retryInterval - now)
            }
            guard mayWait else { return .unavailable(retryAfter: retryInterval) }
            loading = true
            return .wait(startLoad: true)
        }
        let key = kid.flatMap { keys[$0] } ?? (kid == nil && keys.count == 1 ? keys.first?.value : nil)
        if let key {
            let due = now >= refreshAt && !loading && lastFailure.map { now >= $0 + retryInterval } ?? true
            if due { loading = true }
            return .use(key, refresh: due)
        }
        if loading { return mayWait ? .wait(startLoad: false) : .unknownKey }
        guard mayWait, kid != nil, lastUnknownKeyFetch.map({ now >= $0 + cooldown }) ?? true else { return .unknownKey }
        lastUnknownKeyFetch = now
        loading = true
        return .wait(startLoad: true)
    }

    /// A load succeeded at `now`, its set to be used for `lifetime` seconds; `fingerprint` tells
    /// whether it is the set already in hand.
    mutating func loaded(_ keys: [String: Key], fingerprint: String, lifetime: Int64, now: Int64) {
        if fingerprint != self.fingerprint { generation += 1 }
        self.fingerprint = fingerprint
        self.keys = keys
        refreshAt = now + lifetime
        loading = false
        lastFailure = nil
    }

    /// A load failed at `now`: the set held (if any) stays.
    mutating func loadFailed(now: Int64) {
        loading = false
        lastFailure = now
    }
}
