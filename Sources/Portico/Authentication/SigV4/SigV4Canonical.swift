import NIOHTTP1
import PorticoHTTP

/// The canonical request and string to sign of AWS Signature Version 4, built from the request as
/// it arrived.
///
/// - URI: the path as sent, with `.`/`..` segments and repeated slashes removed, then each byte but
///   the unreserved ones and `/` percent-encoded, so a path already encoded is encoded a second
///   time (`%20` → `%2520`) — what AWS asks of every service but S3. For S3 the path is taken as
///   sent (``ServiceSigV4Policy/encodesPathOnce``).
/// - Query: every parameter (but a presigned URL's `X-Amz-Signature`) decoded, re-encoded with
///   only the unreserved bytes left bare, sorted by name then value, joined by `&`.
/// - Fields: each signed field's lines joined by `,`, each value trimmed and its runs of spaces
///   collapsed, `name:value` in SignedHeaders' order, then the SignedHeaders list itself.
enum SigV4Canonical {
    static func uri(path: Substring, encodesOnce: Bool) -> String {
        if encodesOnce { return path.isEmpty ? "/" : String(path) }
        return encode(removingDotSegments(path), keepingSlashes: true)
    }

    /// RFC 3986 §5.2.4's dot-segment removal, with empty segments dropped too (AWS's rule), as
    /// botocore does it.
    static func removingDotSegments(_ path: Substring) -> String {
        guard !path.isEmpty else { return "/" }
        var output: [Substring] = []
        for bytes in path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            let segment = Substring(bytes)
            if segment == "." { continue }
            if segment == ".." {
                if !output.isEmpty { output.removeLast() }
            } else {
                output.append(segment)
            }
        }
        let leading = path.first == "/" ? "/" : ""
        let trailing = path.last == "/" && !output.isEmpty ? "/" : ""
        return leading + output.joined(separator: "/") + trailing
    }

    static func query(_ uri: String, excludingSignature: Bool) -> String {
        var pairs: [(String, String)] = []
        SigV4Credentials.forEachParameter(in: uri) { name, value in
            if excludingSignature && name == "X-Amz-Signature" { return }
            pairs.append((encode(name, keepingSlashes: false), encode(value, keepingSlashes: false)))
        }
        pairs.sort {
            $0.0 == $1.0 ? Array($0.1.utf8).lexicographicallyPrecedes($1.1.utf8) : Array($0.0.utf8).lexicographicallyPrecedes($1.0.utf8)
        }
        return pairs.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// The canonical fields block (each `name:value` and a line feed), or the first signed name the
    /// request lacks.
    static func fields(_ headers: HTTPHeaders, signed: [String]) -> Result<String, MissingField> {
        var block = ""
        for name in signed {
            let lines = headers[name]
            guard !lines.isEmpty else { return .failure(MissingField(name: name)) }
            block += name
            block += ":"
            block += lines.map { trimAll($0[...]) }.joined(separator: ",")
            block += "\n"
        }
        return .success(block)
    }

    struct MissingField: Error {
        let name: String
    }

    /// A value trimmed, its runs of spaces (and tabs) one space.
    static func trimAll(_ value: Substring) -> String {
        value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

    static func request(
        method: String, uri: String, query: String, fields: String, signedHeaders: [String], payloadHash: String
    ) -> String {
        [method, uri, query, fields, signedHeaders.joined(separator: ";"), payloadHash].joined(separator: "\n")
    }

    static func stringToSign(timestamp: String, scope: String, canonicalRequestHash: String) -> String {
        "\(SigV4Credentials.algorithm)\n\(timestamp)\n\(scope)\n\(canonicalRequestHash)"
    }

    /// AWS's URI encoding: every byte but `A–Z a–z 0–9 - . _ ~` (and `/` where kept) as `%XX`,
    /// uppercase.
    static func encode(_ text: some StringProtocol, keepingSlashes: Bool) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if PathNormalizer.isUnreserved(byte) || (keepingSlashes && byte == UInt8(ascii: "/")) {
                output.append(byte)
            } else {
                output.append(UInt8(ascii: "%"))
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var output: [UInt8] = []
        for byte in bytes {
            output.append(digits[Int(byte >> 4)])
            output.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: output, as: UTF8.self)
    }
}
