import Foundation
import RawStructuredFieldValues

/// The hash algorithms of `Content-Digest` (RFC 9530) this gateway computes; others are ignored,
/// as §2 allows, provided at least one known one is present.
public enum DigestAlgorithm: String, Sendable, CaseIterable {
    case sha256 = "sha-256"
    case sha512 = "sha-512"
}

/// Computes message digests. The server backs it with OpenSSL, the client library with
/// swift-crypto; this module stays free of both.
public protocol DigestFunction: Sendable {
    func digest(_ algorithm: DigestAlgorithm, of bytes: UnsafeRawBufferPointer) -> [UInt8]
}

/// `Content-Digest` (RFC 9530 §2): a dictionary of algorithm → byte sequence over the content.
public enum ContentDigest {
    /// The known-algorithm members of a `Content-Digest` value; unknown algorithms are skipped.
    public static func parse(_ value: String) throws(SigningError) -> [(algorithm: DigestAlgorithm, digest: [UInt8])] {
        let dictionary = try SignatureFields.dictionary(value, field: "Content-Digest")
        var result: [(algorithm: DigestAlgorithm, digest: [UInt8])] = []
        for (key, member, _) in dictionary.members {
            guard let algorithm = DigestAlgorithm(rawValue: key) else { continue }
            guard case .item(let item) = member, case .undecodedByteSequence(let base64) = item.bareItem,
                let bytes = Base64.decode(base64)
            else {
                throw .malformedField(field: "Content-Digest", reason: "the \(key) member must be a byte sequence (:base64:)")
            }
            result.append((algorithm, bytes))
        }
        return result
    }

    /// The field value of empty content under SHA-256, as signers write it (RFC 9530 §B.1).
    public static let emptyContentSHA256 = "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"

    /// The field value for `body`: `sha-256=:…:` (or the given algorithm).
    public static func value(
        for body: UnsafeRawBufferPointer, algorithm: DigestAlgorithm = .sha256, using digest: some DigestFunction
    )
        -> String
    {
        algorithm.rawValue + "=:" + Data(digest.digest(algorithm, of: body)).base64EncodedString() + ":"
    }

    /// Whether `body` matches every known-algorithm digest in `value` (and at least one is known).
    /// The comparison does not stop at the first differing byte.
    public static func verify(
        _ value: String, body: UnsafeRawBufferPointer, using digest: some DigestFunction
    ) throws(SigningError)
        -> Bool
    {
        // Most signed requests are GETs, whose signers send exactly this: the answer is known
        // without parsing or hashing. (Digests are of public content; no constant time needed.)
        if body.isEmpty, value == emptyContentSHA256 { return true }
        let members = try parse(value)
        guard !members.isEmpty else {
            let known = DigestAlgorithm.allCases.map(\.rawValue).joined(separator: ", ")
            throw .malformedField(field: "Content-Digest", reason: "no supported algorithm (supported: \(known))")
        }
        var allMatch = true
        for member in members {
            allMatch = ConstantTime.equal(digest.digest(member.algorithm, of: body), member.digest) && allMatch
        }
        return allMatch
    }
}
