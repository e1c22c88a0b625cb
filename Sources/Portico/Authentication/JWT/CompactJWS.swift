import Foundation

/// A bearer token read as a JWS in compact serialisation (RFC 7515 §7.1): `header.payload.signature`,
/// each part base64url without padding. Reading checks the form only; whether the signature holds,
/// and what the claims say, is decided later (``BearerAuthenticator``, ``JWTClaimsCheck``).
///
/// What is refused here, before any key is looked at: a token over the issuer's size limit, any
/// other number of parts (a JWE has five), a part that is not strict base64url, a header that is not
/// a JSON object, a missing or non-string `alg`, any `crit` (no extension is understood here, so RFC
/// 7515 §4.1.11 says refuse), and a nested token (`cty: JWT`).
struct CompactJWS {
    enum Failure: Error, Equatable, CustomStringConvertible {
        case tooLarge(limit: Int)
        case notCompact
        case badEncoding(part: String)
        case headerNotJSON
        case missingAlgorithm
        case critical
        case nested
        case payloadNotJSON

        var description: String {
            switch self {
            case .tooLarge(let limit): "The token is longer than \(limit) bytes."
            case .notCompact: "The token is not a compact JWS (three base64url parts separated by dots)."
            case .badEncoding(let part): "The token's \(part) is not base64url without padding."
            case .headerNotJSON: "The token's header is not a JSON object."
            case .missingAlgorithm: "The token's header names no algorithm (alg)."
            case .critical: "The token's header lists critical extensions (crit), which this gateway does not implement."
            case .nested: "The token is a nested JWT (cty: JWT), which this gateway does not accept."
            case .payloadNotJSON: "The token's payload is not a JSON object of claims."
            }
        }
    }

    /// `alg`, as the header gives it (checked against the issuer's list by the caller).
    let algorithm: String
    let keyID: String?
    /// The bytes the signature covers: the first two parts and the dot between them, as sent.
    let signingInput: [UInt8]
    let signature: [UInt8]
    /// The claims: the payload's JSON object.
    let claims: [String: Any]

    /// Reads `token` (the text after `Bearer `).
    static func read(_ token: Substring, maxBytes: Int) throws(Failure) -> CompactJWS {
        let bytes = token.utf8
        guard bytes.count <= maxBytes else { throw .tooLarge(limit: maxBytes) }
        var dots: [String.Index] = []
        for index in bytes.indices where bytes[index] == UInt8(ascii: ".") {
            dots.append(index)
            if dots.count > 2 { throw .notCompact }
        }
        guard dots.count == 2 else { throw .notCompact }
        let headerPart = token[..<dots[0]]
        let payloadPart = token[token.index(after: dots[0])..<dots[1]]
        let signaturePart = token[token.index(after: dots[1])...]
        guard let headerBytes = Base64URLDecoding.decode(headerPart.utf8), !headerBytes.isEmpty else {
            throw .badEncoding(part: "header")
        }
        guard let payloadBytes = Base64URLDecoding.decode(payloadPart.utf8) else { throw .badEncoding(part: "payload") }
        // An empty signature is read (`alg: none` has one), so that its algorithm is what refuses it.
        guard let signature = Base64URLDecoding.decode(signaturePart.utf8) else { throw .badEncoding(part: "signature") }
        guard let header = (try? JSONSerialization.jsonObject(with: Data(headerBytes))) as? [String: Any] else {
            throw .headerNotJSON
        }
        guard let algorithm = header["alg"] as? String, !algorithm.isEmpty else { throw .missingAlgorithm }
        if header["crit"] != nil { throw .critical }
        if let contentType = header["cty"] as? String, contentType.uppercased() == "JWT" { throw .nested }
        guard let claims = (try? JSONSerialization.jsonObject(with: Data(payloadBytes))) as? [String: Any] else {
            throw .payloadNotJSON
        }
        return CompactJWS(
            algorithm: algorithm, keyID: header["kid"] as? String, signingInput: Array(token[..<dots[1]].utf8), signature: signature,
            claims: claims)
    }
}

/// Strict base64url without padding (RFC 7515 §2): only `A–Z a–z 0–9 - _`, no `=`, no length
/// that leaves a lone 6-bit group, and no stray bits in the last group (so that one value has one
/// encoding).
enum Base64URLDecoding {
    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            guard let value = sextet(byte) else { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // The leftover bits of a partial group must be zero.
        guard accumulator == 0 else { return nil }
        return output
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
