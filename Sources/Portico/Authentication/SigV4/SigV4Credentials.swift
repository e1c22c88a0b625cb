import NIOHTTP1
import PorticoHTTP

/// The SigV4 parts of a request, from either form AWS defines: the `Authorization` field
/// (`AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`) or a presigned URL's query
/// (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`, `X-Amz-SignedHeaders`,
/// `X-Amz-Signature`). Reading checks their form only; ``SigV4Authenticator`` checks what they say.
struct SigV4Credentials: Equatable {
    enum Form: Equatable {
        case header
        /// A presigned URL, valid for `expires` seconds from its date.
        case query(expires: Int64)
    }

    var form: Form
    var accessKeyID: String
    /// The credential scope: `yyyymmdd/region/service/aws4_request`, and its parts.
    var scopeDate: String
    var region: String
    var service: String
    var signedHeaders: [String]
    /// The 32 bytes of the hex signature.
    var signature: [UInt8]
    /// `X-Amz-Date` of a presigned URL (the header form's comes from the fields).
    var queryDate: String?

    /// The algorithm name both forms carry.
    static let algorithm = "AWS4-HMAC-SHA256"

    struct Malformed: Error, Equatable {
        let detail: String
    }

    /// Whether the request carries SigV4 credentials at all (in either form).
    static func isPresent(_ head: HTTPRequestHead) -> Bool {
        if let authorization = head.headers.first(name: "authorization"), authorization.hasPrefix(algorithm) { return true }
        return isPresigned(head.uri)
    }

    /// Whether the query names a presigned URL's algorithm or signature. The bytes are looked at
    /// first, so that a header-signed request's query is not decoded for nothing.
    private static func isPresigned(_ uri: String) -> Bool {
        guard uri.utf8.contains(UInt8(ascii: "?")), uri.utf8.contains(UInt8(ascii: "%")) || mentions("Amz", in: uri) else { return false }
        return queryValue(of: "X-Amz-Algorithm", in: uri) != nil || queryValue(of: "X-Amz-Signature", in: uri) != nil
    }

    private static func mentions(_ needle: String, in text: String) -> Bool {
        let needle = Array(needle.utf8)
        let bytes = Array(text.utf8)
        guard bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains { start in bytes[start..<(start + needle.count)].elementsEqual(needle) }
    }

    /// The credentials of `head`; nil when it carries none.
    static func read(_ head: HTTPRequestHead) throws(Malformed) -> SigV4Credentials? {
        let authorizations = head.headers["authorization"].filter { $0.hasPrefix(algorithm) }
        let inQuery = isPresigned(head.uri)
        if authorizations.isEmpty && !inQuery { return nil }
        if !authorizations.isEmpty && inQuery {
            throw Malformed(detail: "The request is signed both in Authorization and in its query; use one.")
        }
        if authorizations.count > 1 || head.headers["authorization"].count > 1 {
            throw Malformed(detail: "The request carries more than one Authorization field.")
        }
        if head.headers.contains(name: "x-amz-security-token") {
            throw Malformed(detail: "Temporary credentials (x-amz-security-token) are not accepted here.")
        }
        if let authorization = authorizations.first { return try readHeader(authorization[...]) }
        return try readQuery(head.uri)
    }

    /// The three components, found by walking the field's bytes once (splitting a `Substring` by
    /// characters walks grapheme clusters, several times slower for ASCII that has none; the
    /// indices found are the field's own, so the parts are slices of it, not copies).
    private static func readHeader(_ value: Substring) throws(Malformed) -> SigV4Credentials {
        let utf8 = value.utf8
        var index = utf8.index(utf8.startIndex, offsetBy: algorithm.utf8.count)
        guard index < utf8.endIndex, utf8[index] == UInt8(ascii: " ") else {
            throw Malformed(detail: "Expected a space after \(algorithm).")
        }
        var credential: Substring?
        var signedHeaders: Substring?
        var signature: Substring?
        while index <= utf8.endIndex {
            let end = utf8[index...].firstIndex(of: UInt8(ascii: ",")) ?? utf8.endIndex
            let part = value[index..<end].trimmingOptionalWhitespace()
            guard let equals = part.utf8.firstIndex(of: UInt8(ascii: "=")) else {
                throw Malformed(detail: "Expected Credential=…, SignedHeaders=… and Signature=…, found \"\(part.prefix(64))\".")
            }
            let name = part[..<equals]
            let content = part[part.utf8.index(after: equals)...]
            switch name {
            case "Credential":
                guard credential == nil else { throw Malformed(detail: "Credential is given twice.") }
                credential = content
            case "SignedHeaders":
                guard signedHeaders == nil else { throw Malformed(detail: "SignedHeaders is given twice.") }
                signedHeaders = content
            case "Signature":
                guard signature == nil else { throw Malformed(detail: "Signature is given twice.") }
                signature = content
            default:
                throw Malformed(detail: "Unknown Authorization component \(name.prefix(64)).")
            }
            guard end < utf8.endIndex else { break }
            index = utf8.index(after: end)
        }
        guard let credential, let signedHeaders, let signature else {
            let missing = [("Credential", credential), ("SignedHeaders", signedHeaders), ("Signature", signature)]
                .filter { $0.1 == nil }.map(\.0).joined(separator: ", ")
            throw Malformed(detail: "The Authorization field lacks \(missing).")
        }
        return try make(form: .header, credential: credential, signedHeaders: signedHeaders, signature: signature, date: nil)
    }

    private static func readQuery(_ uri: String) throws(Malformed) -> SigV4Credentials {
        for name in ["X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"] {
            switch queryCount(of: name, in: uri) {
            case 0: throw Malformed(detail: "The presigned URL lacks \(name).")
            case 1: break
            default: throw Malformed(detail: "The presigned URL gives \(name) more than once.")
            }
        }
        if queryValue(of: "X-Amz-Security-Token", in: uri) != nil {
            throw Malformed(detail: "Temporary credentials (X-Amz-Security-Token) are not accepted here.")
        }
        guard queryValue(of: "X-Amz-Algorithm", in: uri) == algorithm else {
            throw Malformed(detail: "X-Amz-Algorithm must be \(algorithm).")
        }
        guard let expiresText = queryValue(of: "X-Amz-Expires", in: uri), let expires = Int64(expiresText), expires > 0,
            expiresText.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else {
            throw Malformed(detail: "X-Amz-Expires must be a positive number of seconds.")
        }
        return try make(
            form: .query(expires: expires), credential: queryValue(of: "X-Amz-Credential", in: uri)![...],
            signedHeaders: queryValue(of: "X-Amz-SignedHeaders", in: uri)![...],
            signature: queryValue(of: "X-Amz-Signature", in: uri)![...],
            date: queryValue(of: "X-Amz-Date", in: uri))
    }

    private static func make(
        form: Form, credential: Substring, signedHeaders: Substring, signature: Substring, date: String?
    ) throws(Malformed) -> SigV4Credentials {
        let scope = credential.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map { Substring($0) }
        guard scope.count == 5, !scope[0].isEmpty, scope[4] == "aws4_request", scope[2].utf8.count > 0, scope[3].utf8.count > 0 else {
            throw Malformed(detail: "Credential must be <access key id>/<yyyymmdd>/<region>/<service>/aws4_request.")
        }
        guard scope[1].utf8.count == 8, scope[1].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            throw Malformed(detail: "The credential scope's date must be yyyymmdd.")
        }
        let names = signedHeaders.utf8.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false).map { String(Substring($0)) }
        guard !names.isEmpty, names.allSatisfy({ !$0.isEmpty && HeaderName.isToken($0) && !$0.utf8.contains(where: Self.isUppercase) })
        else {
            throw Malformed(detail: "SignedHeaders must be lowercase field names separated by ';'.")
        }
        // Strictly increasing: sorted, and no name twice.
        for (earlier, later) in zip(names, names.dropFirst()) where !Array(earlier.utf8).lexicographicallyPrecedes(later.utf8) {
            throw Malformed(
                detail: earlier == later ? "SignedHeaders lists a field more than once." : "SignedHeaders must be in alphabetical order.")
        }
        guard let bytes = hexBytes(signature), bytes.count == 32 else {
            throw Malformed(detail: "Signature must be 64 lowercase hexadecimal digits.")
        }
        return SigV4Credentials(
            form: form, accessKeyID: String(scope[0]), scopeDate: String(scope[1]), region: String(scope[2]), service: String(scope[3]),
            signedHeaders: names, signature: bytes, queryDate: date)
    }

    private static func isUppercase(_ byte: UInt8) -> Bool { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) }

    /// Lowercase hex digits (what SigV4 writes) as bytes; nil for anything else.
    static func hexBytes(_ text: Substring) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0, !digits.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = PathNormalizer.hexValue(digits[index]), let low = PathNormalizer.hexValue(digits[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    // MARK: The query

    /// The decoded value of the query parameter `name` (its first), if present.
    static func queryValue(of name: String, in uri: String) -> String? {
        var found: String?
        forEachParameter(in: uri) { key, value in
            if found == nil, key == name { found = value }
        }
        return found
    }

    private static func queryCount(of name: String, in uri: String) -> Int {
        var count = 0
        forEachParameter(in: uri) { key, _ in if key == name { count += 1 } }
        return count
    }

    /// Each parameter of the query, percent-decoded (not `+`: AWS encodes a space as `%20`);
    /// a parameter whose encoding is broken is passed with its raw bytes.
    static func forEachParameter(in uri: String, _ body: (String, String) -> Void) {
        guard let question = uri.utf8.firstIndex(of: UInt8(ascii: "?")) else { return }
        let query = Array(uri.utf8[uri.utf8.index(after: question)...])
        query.withUnsafeBufferPointer { buffer in
            QueryPairs.forEach(in: buffer) { name, value in
                let decodedName = percentDecoded(buffer[name]) ?? String(decoding: buffer[name], as: UTF8.self)
                let decodedValue = value.map { percentDecoded(buffer[$0]) ?? String(decoding: buffer[$0], as: UTF8.self) } ?? ""
                body(decodedName, decodedValue)
            }
        }
    }

    static func percentDecoded(_ bytes: some Collection<UInt8>) -> String? {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                output.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(PathNormalizer.hexValue), let low = iterator.next().flatMap(PathNormalizer.hexValue)
            else { return nil }
            output.append(high << 4 | low)
        }
        return String(validating: output, as: UTF8.self)
    }
}
