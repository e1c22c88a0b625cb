import Foundation
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

/// The answers of the bearer-token and SigV4 schemes, and of a service that takes several.
///
/// Each 401 carries the scheme's `WWW-Authenticate` challenge: RFC 6750's `Bearer` (with its
/// `error` code) for tokens, `AWS4-HMAC-SHA256` for SigV4. A token that verified but lacks a scope
/// is 403 `insufficient_scope` (RFC 6750 §3.1), naming the scopes required.
extension Problem {
    /// A request that carries none of the credentials a service with several schemes takes: the
    /// answer names them all, and has one challenge per scheme.
    static func credentialsRequired(_ schemes: [AuthScheme], apiKeyHeader: String) -> Problem {
        let names = schemes.map(\.rawValue).joined(separator: ", ")
        var problem = unauthorized(
            "credentials-required", title: "Credentials required",
            detail: "This service takes any one of: \(names). The request carries none of them.")
        problem.extensions = [("accepted", names)]
        problem.headers = schemes.map { ("www-authenticate", challenge(for: $0, apiKeyHeader: apiKeyHeader)) }
        return problem
    }

    static func challenge(for scheme: AuthScheme, apiKeyHeader: String) -> String {
        switch scheme {
        case .apiKey: "APIKey header=\"\(apiKeyHeader)\""
        case .signature: "Signature realm=\"portico\", alg=\"hmac-sha256\""
        case .jwt: "Bearer realm=\"portico\""
        case .sigv4: "AWS4-HMAC-SHA256"
        }
    }

    // MARK: Bearer tokens

    private static func invalidToken(_ type: String, title: String, detail: String) -> Problem {
        let description = detail.replacingOccurrences(of: "\"", with: "'")
        return unauthorized(
            type, title: title, detail: detail,
            challenge: "Bearer realm=\"portico\", error=\"invalid_token\", error_description=\"\(description)\"")
    }

    static func tokenRequired() -> Problem {
        unauthorized(
            "token-required", title: "Bearer token required",
            detail: "This service requires a bearer token: send Authorization: Bearer <JWT>.", challenge: "Bearer realm=\"portico\"")
    }

    static func malformedToken(_ detail: String) -> Problem {
        invalidToken("malformed-token", title: "Malformed token", detail: detail)
    }

    static func tokenAlgorithmRefused(_ algorithm: String, accepted: [JWTAlgorithmName]) -> Problem {
        let names = accepted.map(\.rawValue).joined(separator: ", ")
        return invalidToken(
            "token-algorithm-refused", title: "Token algorithm not accepted",
            detail: "The token is signed with \(algorithm); its issuer's tokens must use one of \(names).")
    }

    /// A token whose signature does not verify, whose `kid` names no key of its issuer (after a
    /// fresh look at the issuer's keys), or whose issuer this service does not take.
    static func tokenInvalid(_ detail: String) -> Problem {
        invalidToken("token-invalid", title: "Invalid token", detail: detail)
    }

    static func tokenExpired(expires: Int64, now: Int64) -> Problem {
        var problem = invalidToken("token-expired", title: "Token expired", detail: "The token expired \(now - expires) s ago.")
        problem.extensions = [("serverTime", String(now))]
        return problem
    }

    static func tokenNotYetValid(claim: String, at start: Int64, now: Int64) -> Problem {
        var problem = invalidToken(
            "token-not-yet-valid", title: "Token not yet valid",
            detail: "The token's \(claim) is \(start - now) s ahead of the server's clock.")
        problem.extensions = [("serverTime", String(now))]
        return problem
    }

    static func tokenAudienceRefused(accepted: [String]) -> Problem {
        invalidToken(
            "token-audience-refused", title: "Token for another audience",
            detail: "The token's aud names none of this gateway's audiences (\(accepted.joined(separator: ", "))).")
    }

    static func tokenClaimsMissing(_ claim: String) -> Problem {
        invalidToken("token-claims-missing", title: "Token claim missing", detail: "The token must carry the \(claim) claim.")
    }

    static func tokenScopeInsufficient(required: [String]) -> Problem {
        let scopes = required.joined(separator: " ")
        var problem = Problem(
            type: typePrefix + "token-scope-insufficient", title: "Insufficient scope", status: .forbidden,
            detail: "This service requires the scopes: \(scopes).")
        problem.headers = [("www-authenticate", "Bearer realm=\"portico\", error=\"insufficient_scope\", scope=\"\(scopes)\"")]
        problem.extensions = [("scope", scopes)]
        return problem
    }

    static func tokenClaimRefused(_ claim: String) -> Problem {
        Problem(
            type: typePrefix + "token-claim-refused", title: "Token not allowed here", status: .forbidden,
            detail: "The token's \(claim) claim is not one this service accepts.")
    }

    /// No key set of the issuer was ever loaded and it cannot be fetched now: no verdict on the
    /// token is possible, so the answer is the gateway's failure, not the client's.
    static func issuerKeysUnavailable(issuer: String, retryAfter: Int64) -> Problem {
        var problem = Problem(
            type: typePrefix + "issuer-keys-unavailable", title: "Token issuer's keys unavailable", status: .serviceUnavailable,
            detail: "The keys of the token's issuer (\(issuer)) could not be fetched; retry later.")
        problem.headers = [("retry-after", String(max(1, retryAfter)))]
        return problem
    }

    // MARK: SigV4

    private static func sigv4(_ type: String, title: String, detail: String) -> Problem {
        unauthorized(type, title: title, detail: detail, challenge: "AWS4-HMAC-SHA256")
    }

    static func sigv4Required() -> Problem {
        sigv4(
            "sigv4-required", title: "AWS SigV4 signature required",
            detail: "This service requires an AWS Signature Version 4 (Authorization: AWS4-HMAC-SHA256 …, or a presigned URL).")
    }

    static func malformedSigV4(_ detail: String) -> Problem {
        sigv4("malformed-sigv4", title: "Malformed SigV4 signature", detail: detail)
    }

    static func sigv4ScopeRefused(_ detail: String) -> Problem {
        sigv4("sigv4-scope-refused", title: "SigV4 credential scope refused", detail: detail)
    }

    static func sigv4ClockSkew(signed: Int64, now: Int64, allowed: Int64) -> Problem {
        let direction = signed > now ? "ahead of" : "behind"
        var problem = sigv4(
            "sigv4-clock-skew", title: "Request time too far off",
            detail: "The request's signing time is \(abs(signed - now)) s \(direction) the server's clock; at most \(allowed) s is allowed."
        )
        problem.extensions = [("serverTime", String(now))]
        problem.headers.append(("date", HTTPDate.format(now)))
        return problem
    }

    static func sigv4Expired(expired: Int64, now: Int64) -> Problem {
        var problem = sigv4("sigv4-expired", title: "Presigned URL expired", detail: "The presigned URL expired \(now - expired) s ago.")
        problem.extensions = [("serverTime", String(now))]
        return problem
    }

    static func sigv4UnsignedPayloadRefused() -> Problem {
        sigv4(
            "sigv4-unsigned-payload-refused", title: "Unsigned payload not accepted",
            detail: "This service requires the body to be signed: send its SHA-256 in x-amz-content-sha256, not UNSIGNED-PAYLOAD.")
    }

    /// The same answer for an unknown access key id, a wrong secret and an altered request.
    static func sigv4Invalid() -> Problem {
        sigv4(
            "sigv4-invalid", title: "Invalid SigV4 signature",
            detail:
                "The signature does not match the request. Check the secret access key, and that the request was not changed after signing."
        )
    }

    static func sigv4PayloadMismatch() -> Problem {
        Problem(
            type: typePrefix + "sigv4-payload-mismatch", title: "Body does not match x-amz-content-sha256", status: .badRequest,
            detail: "The request body's SHA-256 is not the one x-amz-content-sha256 gives; it was changed or truncated on the way.")
    }
}
