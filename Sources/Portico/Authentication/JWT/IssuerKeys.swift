import Foundation
import JWTKit
import NIOConcurrencyHelpers
import NIOCore
import PorticoPolicy

/// One issuer's public keys, as verifiers by `kid` and algorithm, fetched and refreshed as
/// ``IssuerKeyState`` decides. Shared by every event loop and kept across policy reloads while the
/// issuer's key source stays the same (``JWTKeySets``).
final class IssuerKeys: Sendable {
    /// One key of the set: a verifier for each algorithm the issuer allows that the key can do.
    struct Key: Sendable {
        let keyType: String
        let verifiers: [JWTAlgorithmName: any JWTAlgorithm]
    }

    enum Lookup {
        /// The key, and the generation of the set it is from (``IssuerKeyState/generation``).
        case key(Key, generation: Int)
        case unknownKey
        case unavailable(retryAfter: Int64)
        /// Look again once this completes (on any thread).
        case wait(EventLoopFuture<Void>)
    }

    /// A token whose signature verified with a key of this set, and what it says: a client sends
    /// the same token for as long as it lives, and each request after the first costs a lookup
    /// instead of reading JSON and a public-key operation. Its claims are checked at every request.
    final class VerifiedToken: @unchecked Sendable {
        // @unchecked: immutable once made, and `claims` holds only what JSONSerialization returns.
        let generation: Int
        let keyID: String?
        let claims: [String: Any]

        init(generation: Int, keyID: String?, claims: [String: Any]) {
            self.generation = generation
            self.keyID = keyID
            self.claims = claims
        }
    }

    /// The most verified tokens kept per issuer; past it, one (any) is let go for each new one.
    static let maxVerifiedTokens = 4096

    private struct Shared: Sendable {
        var state: IssuerKeyState<Key>
        /// The load under way, which waiting tokens are told to wait for.
        var load: EventLoopFuture<Void>?
        /// By the token's exact text: only a byte-identical token matches.
        var verified: [String: VerifiedToken] = [:]
    }

    private let shared: NIOLockedValueBox<Shared>
    private let policy: JWTIssuerPolicy
    private let loader: JWKSLoader

    init(policy: JWTIssuerPolicy, loader: JWKSLoader) {
        self.policy = policy
        self.loader = loader
        let cooldown = max(0, policy.refetchCooldown.components.seconds)
        shared = NIOLockedValueBox(Shared(state: IssuerKeyState(cooldown: cooldown)))
    }

    /// The key a token naming `kid` is checked with, or what to do instead.
    func lookup(kid: String?, now: Int64, mayWait: Bool, on eventLoop: any EventLoop) -> Lookup {
        var start: EventLoopPromise<Void>?
        let lookup: Lookup = shared.withLockedValue { shared in
            switch shared.state.lookup(kid: kid, now: now, mayWait: mayWait) {
            case .use(let key, let refresh):
                if refresh { start = Self.loadStarted(&shared, on: eventLoop) }
                return .key(key, generation: shared.state.generation)
            case .unknownKey:
                return .unknownKey
            case .unavailable(let retryAfter):
                return .unavailable(retryAfter: retryAfter)
            case .wait(let startLoad):
                if startLoad { start = Self.loadStarted(&shared, on: eventLoop) }
                return .wait(shared.load ?? eventLoop.makeSucceededVoidFuture())
            }
        }
        if let start { load(completing: start, on: eventLoop) }
        return lookup
    }

    /// The verification `token` had with the set in hand, if any: one made with an earlier set
    /// (a key added, removed or replaced since) does not count. The set's schedule runs as for a
    /// lookup, so that tokens served from here still start its refresh when it is due.
    func verified(_ token: Substring, now: Int64, on eventLoop: any EventLoop) -> VerifiedToken? {
        var start: EventLoopPromise<Void>?
        let found: VerifiedToken? = shared.withLockedValue { shared in
            guard let entry = shared.verified[String(token)], entry.generation == shared.state.generation else { return nil }
            guard case .use(_, let refresh) = shared.state.lookup(kid: entry.keyID, now: now, mayWait: false) else { return nil }
            if refresh { start = Self.loadStarted(&shared, on: eventLoop) }
            return entry
        }
        if let start { load(completing: start, on: eventLoop) }
        return found
    }

    /// The promise of a load the state has just decided on, which later lookups wait for until it
    /// completes (a token with an unknown kid that arrives during a refresh waits for that too);
    /// the caller starts the load once the lock is released.
    private static func loadStarted(_ shared: inout Shared, on eventLoop: any EventLoop) -> EventLoopPromise<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        shared.load = promise.futureResult
        return promise
    }

    /// Keeps `token`, whose signature has just verified with a key of generation `generation`.
    func remember(_ token: Substring, _ entry: VerifiedToken) {
        shared.withLockedValue { shared in
            if shared.verified.count >= Self.maxVerifiedTokens, let any = shared.verified.keys.first {
                shared.verified[any] = nil
            }
            shared.verified[String(token)] = entry
        }
    }

    /// Loads the set off the event loop; `promise` completes (always succeeding) once the state
    /// has taken the outcome, so that whoever waits looks again at a decided state.
    private func load(completing promise: EventLoopPromise<Void>, on eventLoop: any EventLoop) {
        let policy = policy
        let loader = loader
        let shared = shared
        Task(executorPreference: KeyImportExecutor.shared) {
            let outcome = await loader.load(policy, on: eventLoop)
            let now = RequestAuthenticator.now()
            shared.withLockedValue { shared in
                switch outcome {
                case .success(let loaded):
                    let lifetime = JWKSLoader.lifetime(loaded.maxAge, policy: policy)
                    shared.state.loaded(loaded.keys, fingerprint: loaded.fingerprint, lifetime: lifetime, now: now)
                    shared.verified = shared.verified.filter { $0.value.generation == shared.state.generation }
                case .failure:
                    shared.state.loadFailed(now: now)
                }
                shared.load = nil
            }
            if case .failure(let failure) = outcome { loader.report(failure, issuer: policy.name) }
            promise.succeed(())
        }
    }
}

/// The key sets of every issuer the gateway has met, by the issuer's whole policy, so that a reload
/// that leaves an issuer alone keeps its fetched keys and refresh schedule, and one that changes
/// any of its settings starts it afresh. Sets of issuers a reload removed stay until the process
/// ends (a few kilobytes each).
final class JWTKeySets: Sendable {
    private typealias Source = JWTIssuerPolicy

    private let sets = NIOLockedValueBox<[Source: IssuerKeys]>([:])
    let loader: JWKSLoader

    init(loader: JWKSLoader) {
        self.loader = loader
    }

    func keys(for issuer: JWTIssuerPolicy) -> IssuerKeys {
        sets.withLockedValue { sets in
            if let known = sets[issuer] { return known }
            let keys = IssuerKeys(policy: issuer, loader: loader)
            sets[issuer] = keys
            return keys
        }
    }
}
