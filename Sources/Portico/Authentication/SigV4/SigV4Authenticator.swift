import Foundation
import NIOCore
import NIOHTTP1
import PorticoCrypto
import PorticoHTTP
import PorticoPolicy
import PorticoSigning

/// `auth: sigv4`: a request signed with AWS Signature Version 4 by a key with an `accessKeyId`,
/// scoped to the service's `sigv4: { region, service }`.
///
/// Checked in order, each refusal with its own problem: the form (``SigV4Credentials``); the
/// credential scope; the signing time (within `clockSkew`, or for a presigned URL within its
/// `X-Amz-Expires`, at most `maxExpires`); the signed fields (`host` and every `x-amz-*` field sent
/// among them, each one present); the payload hash; then the MACs. Like the RFC 9421 check it
/// always computes two MACs (the current secret's and the previous one's, or stand-ins), and an
/// unknown access key id gets the same answer as a wrong secret.
///
/// The body: `x-amz-content-sha256` states its hash, checked against the whole body before any
/// handler sees it; `UNSIGNED-PAYLOAD` leaves it unsigned, which the service must allow. Without the
/// field (botocore's way for services other than S3) the signature covers the body's hash itself,
/// so the check waits for the whole body (``SchemeOutcome/needsBody``).
///
/// There are no nonces: a signed request can be replayed, unchanged, while its time is within the
/// skew (a presigned URL: until it expires). The TLS listener is what keeps it from being seen.
struct SigV4Authenticator {
    let credentials: Credentials

    static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    func authenticate(
        _ head: HTTPRequestHead, body: ByteBuffer?, bodyArrived: Bool, hasBody: Bool, service: ServicePolicy, now: Int64
    ) -> SchemeOutcome {
        guard let settings = service.sigv4 else { return .failure(.sigv4Required()) }
        let presented: SigV4Credentials
        do {
            guard let read = try SigV4Credentials.read(head) else { return .failure(.sigv4Required()) }
            presented = read
        } catch {
            return .failure(.malformedSigV4(error.detail))
        }
        guard presented.region == settings.region, presented.service == settings.service else {
            return .failure(
                .sigv4ScopeRefused(
                    "The credential is scoped to \(presented.region)/\(presented.service); this service takes \(settings.region)/\(settings.service)."
                ))
        }
        let timestamp: String
        let signedAt: Int64
        switch Self.signingTime(head, presented) {
        case .failure(let problem): return .failure(problem)
        case .success(let time): (timestamp, signedAt) = time
        }
        guard timestamp.hasPrefix(presented.scopeDate) else {
            return .failure(.malformedSigV4("The credential scope's date (\(presented.scopeDate)) is not the signing date (\(timestamp))."))
        }
        let skew = settings.clockSkew.components.seconds
        switch presented.form {
        case .header:
            if abs(now - signedAt) > skew { return .failure(.sigv4ClockSkew(signed: signedAt, now: now, allowed: skew)) }
        case .query(let expires):
            if expires > settings.maxExpires.components.seconds {
                return .failure(
                    .malformedSigV4("X-Amz-Expires is \(expires) s; at most \(settings.maxExpires.components.seconds) s is accepted."))
            }
            if signedAt - now > skew { return .failure(.sigv4ClockSkew(signed: signedAt, now: now, allowed: skew)) }
            if now >= signedAt + expires { return .failure(.sigv4Expired(expired: signedAt + expires, now: now)) }
        }
        if let problem = Self.coverageProblem(head, presented) { return .failure(problem) }

        let payloadHash: String
        var payloadCheck: [UInt8]?
        if let stated = head.headers.first(name: "x-amz-content-sha256") {
            if stated == "UNSIGNED-PAYLOAD" {
                guard settings.allowUnsignedPayload else { return .failure(.sigv4UnsignedPayloadRefused()) }
            } else {
                guard let bytes = SigV4Credentials.hexBytes(stated[...]), bytes.count == 32 else {
                    return .failure(.malformedSigV4("x-amz-content-sha256 must be 64 lowercase hexadecimal digits or UNSIGNED-PAYLOAD."))
                }
                payloadCheck = bytes
            }
            payloadHash = stated
        } else if case .query = presented.form, settings.encodesPathOnce {
            // An S3 presigned URL never covers a body.
            if hasBody && !settings.allowUnsignedPayload { return .failure(.sigv4UnsignedPayloadRefused()) }
            payloadHash = "UNSIGNED-PAYLOAD"
        } else if !hasBody {
            payloadHash = Self.emptyPayloadHash
        } else if bodyArrived {
            let digest = OpenSSLDigest()
            let hash =
                body.map { $0.withUnsafeReadableBytes { digest.digest(.sha256, of: $0) } }
                ?? digest.digest(.sha256, of: UnsafeRawBufferPointer(start: nil, count: 0))
            payloadHash = SigV4Canonical.hex(hash)
        } else {
            return .needsBody
        }

        let fields: String
        switch SigV4Canonical.fields(head.headers, signed: presented.signedHeaders) {
        case .success(let block): fields = block
        case .failure(let missing):
            return .failure(.malformedSigV4("SignedHeaders names \(missing.name), which the request does not carry."))
        }
        let path = head.uri.utf8.firstIndex(of: UInt8(ascii: "?")).map { head.uri[..<$0] } ?? head.uri[...]
        let isQuery = if case .query = presented.form { true } else { false }
        let canonical = SigV4Canonical.request(
            method: head.method.wireName, uri: SigV4Canonical.uri(path: path, encodesOnce: settings.encodesPathOnce),
            query: SigV4Canonical.query(head.uri, excludingSignature: isQuery), fields: fields, signedHeaders: presented.signedHeaders,
            payloadHash: payloadHash)
        let canonicalHash = Array(canonical.utf8).withUnsafeBytes { OpenSSLDigest().digest(.sha256, of: $0) }
        let scope = "\(presented.scopeDate)/\(presented.region)/\(presented.service)/aws4_request"
        let stringToSign = Array(
            SigV4Canonical.stringToSign(timestamp: timestamp, scope: scope, canonicalRequestHash: SigV4Canonical.hex(canonicalHash)).utf8)

        // Two MACs whatever the id: the key's current and previous secrets, or stand-ins.
        let credential = credentials.byAccessKeyID[presented.accessKeyID]
        let keys = credential?.sigv4
        let matches = { (keys: SigV4SigningKeys) in
            stringToSign.withUnsafeBytes { message in
                let key = keys.key(date: presented.scopeDate, region: presented.region, service: presented.service)
                return ConstantTime.equal(key.authenticationCode(for: message), presented.signature)
            }
        }
        let matchesFirst = matches(keys?.current ?? credentials.sigv4Decoy)
        let matchesSecond = matches(keys?.previous ?? credentials.sigv4SecondDecoy)
        let previousCounts = credential?.previous.map { now < $0.expires } ?? false
        guard let credential, matchesFirst || (matchesSecond && previousCounts) else { return .failure(.sigv4Invalid()) }
        if let refusal = RequestAuthenticator.authorize(credential, service: service) { return .failure(refusal) }
        var authentication = Authentication(scheme: .sigv4, keyID: credential.id, tier: credential.tier)
        authentication.payloadSHA256 = payloadCheck
        return .success(authentication)
    }

    /// The time the request was signed at, as the string to sign writes it (`yyyymmddThhmmssZ`)
    /// and in seconds: `X-Amz-Date` (the field, or a presigned URL's parameter), else `Date`.
    static func signingTime(_ head: HTTPRequestHead, _ presented: SigV4Credentials) -> Result<(String, Int64), Problem> {
        if case .query = presented.form {
            guard let text = presented.queryDate, let seconds = basicTimestamp(text) else {
                return .failure(.malformedSigV4("X-Amz-Date must be yyyymmddThhmmssZ."))
            }
            return .success((text, seconds))
        }
        let amzDates = head.headers["x-amz-date"]
        if amzDates.count > 1 { return .failure(.malformedSigV4("x-amz-date is given more than once.")) }
        if let text = amzDates.first {
            guard let seconds = basicTimestamp(String(text)) else {
                return .failure(.malformedSigV4("x-amz-date must be yyyymmddThhmmssZ."))
            }
            return .success((String(text), seconds))
        }
        guard let date = head.headers.first(name: "date"), let seconds = HTTPDate.parse(date) else {
            return .failure(.malformedSigV4("The request states no signing time: send x-amz-date (or Date)."))
        }
        return .success((formatBasic(seconds), seconds))
    }

    /// Every field the signature must cover is among SignedHeaders: `host`, the field that gave
    /// the signing time, and each `x-amz-*` field sent.
    static func coverageProblem(_ head: HTTPRequestHead, _ presented: SigV4Credentials) -> Problem? {
        let signed = presented.signedHeaders
        var missing: [String] = []
        if !signed.contains("host") { missing.append("host") }
        if case .header = presented.form {
            let time = head.headers.contains(name: "x-amz-date") ? "x-amz-date" : "date"
            if !signed.contains(time) { missing.append(time) }
        }
        for (name, _) in head.headers where Self.isAmzField(name) && !signed.contains(where: { HeaderName.matches(name, $0) }) {
            let lowercased = name.lowercased()
            if !missing.contains(lowercased) { missing.append(lowercased) }
        }
        guard !missing.isEmpty else { return nil }
        return .malformedSigV4(
            "The signature must cover \(missing.sorted().joined(separator: ", ")); SignedHeaders leaves out what the request sends.")
    }

    /// `x-amz-…`, in any case, without making a string of it.
    private static func isAmzField(_ name: String) -> Bool {
        let prefix = "x-amz-".utf8
        guard name.utf8.count > prefix.count else { return false }
        return zip(name.utf8, prefix).allSatisfy { $0 | 0x20 == $1 }
    }

    /// `yyyymmddThhmmssZ` in seconds since 1970.
    static func basicTimestamp(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 16, bytes[8] == UInt8(ascii: "T"), bytes[15] == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(4..<6), let day = number(6..<8), let hour = number(9..<11),
            let minute = number(11..<13), let second = number(13..<15), (1...12).contains(month), (1...31).contains(day), hour < 24,
            minute < 60, second < 61
        else { return nil }
        return HTTPDate.epochSeconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    static func formatBasic(_ seconds: Int64) -> String {
        HTTPDate.formatBasicISO8601(seconds)
    }
}
