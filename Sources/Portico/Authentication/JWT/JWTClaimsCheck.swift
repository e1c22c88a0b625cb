import Foundation
import PorticoPolicy

/// What a verified token's claims must say (RFC 7519 §4.1), and what of them goes on to the backend.
///
/// Times are checked with the issuer's `clockSkew` either way: `exp` must be ahead of the clock
/// (less the skew), `nbf` and `iat` not beyond it (plus the skew). A time claim that is not a
/// number is malformed rather than ignored, and so is an `aud` that is neither a string nor a list
/// of strings: a check that skips what it cannot read would pass a token it should refuse.
struct JWTClaimsCheck {
    let issuer: JWTIssuerPolicy
    let service: ServiceJWTPolicy
    let now: Int64

    struct Admitted {
        /// `sub`, for the access log.
        var subject: String?
        /// The request fields `forwardClaims` adds.
        var forwarded: [(name: String, value: String)]
    }

    func check(_ claims: [String: Any]) -> Result<Admitted, Problem> {
        let skew = issuer.clockSkew.components.seconds
        for name in issuer.requiredClaims where claims[name] == nil || claims[name] is NSNull {
            return .failure(.tokenClaimsMissing(name))
        }
        switch Self.time(claims["exp"]) {
        case .malformed: return .failure(.malformedToken("The exp claim is not a number of seconds."))
        case .value(let expires) where now >= expires + skew: return .failure(.tokenExpired(expires: expires, now: now))
        default: break
        }
        for name in ["nbf", "iat"] {
            switch Self.time(claims[name]) {
            case .malformed: return .failure(.malformedToken("The \(name) claim is not a number of seconds."))
            case .value(let start) where start > now + skew: return .failure(.tokenNotYetValid(claim: name, at: start, now: now))
            default: break
            }
        }
        switch Self.strings(claims["aud"]) {
        case nil: return .failure(.malformedToken("The aud claim is neither a string nor a list of strings."))
        case let audiences?:
            if !issuer.audiences.contains("*") && !audiences.contains(where: issuer.audiences.contains) {
                return .failure(.tokenAudienceRefused(accepted: issuer.audiences))
            }
        }
        let granted = Set(Self.scopes(claims))
        let missing = service.scopes.filter { !granted.contains($0) }
        if !missing.isEmpty { return .failure(.tokenScopeInsufficient(required: service.scopes)) }
        for (name, accepted) in service.claims.sorted(by: { $0.key < $1.key }) {
            let values = Self.strings(claims[name]) ?? []
            if !values.contains(where: accepted.contains) { return .failure(.tokenClaimRefused(name)) }
        }
        var forwarded: [(name: String, value: String)] = []
        for (claim, field) in service.forwardClaims {
            guard let value = claims[claim], !(value is NSNull) else { continue }
            guard let text = Self.fieldValue(value) else {
                return .failure(
                    .malformedToken(
                        "The \(claim) claim cannot be passed on as a request field (it holds control characters or is over 4 KiB)."))
            }
            forwarded.append((field, text))
        }
        return .success(Admitted(subject: claims["sub"] as? String, forwarded: forwarded))
    }

    enum Time: Equatable {
        case absent
        case malformed
        case value(Int64)
    }

    /// A NumericDate: seconds since 1970, possibly fractional (truncated). JSON booleans come out
    /// of Foundation as numbers too, so they are told apart and refused.
    static func time(_ value: Any?) -> Time {
        guard let value, !(value is NSNull) else { return .absent }
        // Foundation boxes a JSON boolean as an NSNumber whose type encoding is `c` (char).
        guard let number = value as? NSNumber, number.objCType.pointee != CChar(UInt8(ascii: "c")) else { return .malformed }
        let seconds = number.doubleValue
        guard seconds.isFinite, abs(seconds) < 1e15 else { return .malformed }
        return .value(Int64(seconds))
    }

    /// A claim as a list of strings: one string, or an array of them; absent is empty; nil when it
    /// is something else.
    static func strings(_ value: Any?) -> [String]? {
        switch value {
        case nil, is NSNull: []
        case let text as String: [text]
        case let items as [Any]:
            items.allSatisfy({ $0 is String }) ? items.compactMap { $0 as? String } : nil
        default: nil
        }
    }

    /// The scopes granted: `scope` (RFC 8693, space-separated), else `scp` (a list or a string).
    static func scopes(_ claims: [String: Any]) -> [String] {
        if let scope = claims["scope"] as? String { return scope.split(separator: " ").map(String.init) }
        if let scp = claims["scp"] as? String { return scp.split(separator: " ").map(String.init) }
        return (claims["scp"] as? [Any])?.compactMap { $0 as? String } ?? []
    }

    /// A string as it is, anything else as compact JSON; nil when it would put a control
    /// character (a line break, say) into a request field.
    static func fieldValue(_ value: Any) -> String? {
        let text: String
        if let string = value as? String {
            text = string
        } else if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]) {
            text = String(decoding: data, as: UTF8.self)
        } else {
            return nil
        }
        guard text.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F }), text.utf8.count <= 4096 else { return nil }
        return text
    }
}
