import Foundation
import JWTKit
import NIOCore
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

/// `auth: jwt`: an `Authorization: Bearer` token from one of the service's issuers.
///
/// In order, each refusal with its own problem: the token's form (``CompactJWS``); its `iss`, one
/// of the service's issuers'; its `alg`, one that issuer allows (so never `none`, never HMAC); the
/// key its `kid` names, of a type that algorithm needs; the signature, by JWTKit; then the claims
/// (``JWTClaimsCheck``). A `kid` the gateway has not seen makes it look at the issuer's keys again
/// (``IssuerKeys``), and the request waits for that, off the event loop.
struct BearerAuthenticator {
    let keySets: JWTKeySets
    let issuers: [String: JWTIssuerPolicy]

    /// The token in `Authorization: Bearer <token>`, if the request carries one.
    static func token(in headers: HTTPHeaders) -> Substring? {
        guard let value = headers.first(name: "authorization") else { return nil }
        let text = value[...].trimmingOptionalWhitespace()
        guard text.utf8.count > 7, text.prefix(6).lowercased() == "bearer", text.utf8.dropFirst(6).first == UInt8(ascii: " ") else {
            return nil
        }
        return text.dropFirst(7).trimmingOptionalWhitespace()
    }

    func authenticate(
        _ head: HTTPRequestHead, service: ServicePolicy, now: Int64, mayWait: Bool, on eventLoop: any EventLoop
    ) -> SchemeOutcome {
        guard let settings = service.jwt else { return .failure(.tokenRequired()) }
        let accepted = settings.issuers.compactMap { issuers[$0] }
        guard let token = Self.token(in: head.headers) else { return .failure(.tokenRequired()) }
        if head.headers["authorization"].count > 1 {
            return .failure(.malformedToken("The request carries more than one Authorization field."))
        }
        // A token seen before, verified with the set in hand: its claims alone are checked again.
        for issuer in accepted where token.utf8.count <= issuer.maxTokenBytes {
            if let known = keySets.keys(for: issuer).verified(token, now: now, on: eventLoop) {
                return admit(known.claims, issuer: issuer, settings: settings, now: now)
            }
        }
        let jws: CompactJWS
        do {
            jws = try CompactJWS.read(token, maxBytes: accepted.map(\.maxTokenBytes).max() ?? 8192)
        } catch {
            return .failure(.malformedToken(error.description))
        }
        guard let claimedIssuer = jws.claims["iss"] as? String, let issuer = accepted.first(where: { $0.issuer == claimedIssuer }) else {
            return .failure(.tokenInvalid("The token's issuer (iss) is not one this service accepts."))
        }
        guard token.utf8.count <= issuer.maxTokenBytes else {
            return .failure(.malformedToken(CompactJWS.Failure.tooLarge(limit: issuer.maxTokenBytes).description))
        }
        guard let algorithm = JWTAlgorithmName(rawValue: jws.algorithm), issuer.algorithms.contains(algorithm) else {
            return .failure(.tokenAlgorithmRefused(jws.algorithm, accepted: issuer.algorithms))
        }
        let keys = keySets.keys(for: issuer)
        let key: IssuerKeys.Key
        let generation: Int
        switch keys.lookup(kid: jws.keyID, now: now, mayWait: mayWait, on: eventLoop) {
        case .wait(let loaded): return .wait(loaded)
        case .unavailable(let retryAfter): return .failure(.issuerKeysUnavailable(issuer: issuer.name, retryAfter: retryAfter))
        case .unknownKey:
            return .failure(
                .tokenInvalid(jws.keyID.map { _ in "No key of the token's issuer has its kid." } ?? "The token names no key (kid)."))
        case .key(let found, let current): (key, generation) = (found, current)
        }
        guard let verifier = key.verifiers[algorithm] else {
            return .failure(
                .tokenInvalid("The key the token's kid names is an \(key.keyType) key, which cannot verify \(algorithm.rawValue)."))
        }
        guard (try? verifier.verify(jws.signature, signs: jws.signingInput)) == true else {
            return .failure(.tokenInvalid("The token's signature does not verify."))
        }
        keys.remember(token, IssuerKeys.VerifiedToken(generation: generation, keyID: jws.keyID, claims: jws.claims))
        return admit(jws.claims, issuer: issuer, settings: settings, now: now)
    }

    /// The claims of a token whose signature holds, checked for this service at `now`.
    private func admit(_ claims: [String: Any], issuer: JWTIssuerPolicy, settings: ServiceJWTPolicy, now: Int64) -> SchemeOutcome {
        switch JWTClaimsCheck(issuer: issuer, service: settings, now: now).check(claims) {
        case .failure(let problem): return .failure(problem)
        case .success(let admitted):
            var authentication = Authentication(scheme: .jwt)
            authentication.subject = "\(issuer.name):\(admitted.subject ?? "-")"
            authentication.forwardedFields = admitted.forwarded
            return .success(authentication)
        }
    }
}
