import NIOCore
import NIOHTTP1
import PorticoHTTP

/// An error answer in RFC 9457 `application/problem+json` form.
///
/// `type` is a stable URI per kind of problem, so clients branch on it rather than on wording;
/// `detail` helps an honest client fix its request and never carries secrets or internal addresses.
public struct Problem: Error, Sendable {
    public var type: String
    public var title: String
    public var status: HTTPResponseStatus
    public var detail: String?
    /// Extension members (RFC 9457 §3.2), e.g. the backend name for a 502.
    public var extensions: [(String, String)]
    /// Whether the connection must close after this answer (the request could not be framed or read).
    public var closesConnection: Bool
    /// Response header fields that go with this problem (`Retry-After`, `WWW-Authenticate`, `Date`).
    public var headers: [(String, String)] = []

    public init(
        type: String, title: String, status: HTTPResponseStatus, detail: String? = nil,
        extensions: [(String, String)] = [], closesConnection: Bool = false
    ) {
        self.type = type
        self.title = title
        self.status = status
        self.detail = detail
        self.extensions = extensions
        self.closesConnection = closesConnection
    }

    static let typePrefix = "urn:portico:problem:"

    /// The JSON body, with `instance` set to the request id so a report can be matched to a log line.
    func body(requestID: String) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(192 + (detail?.utf8.count ?? 0))
        buffer.writeStaticString("{\"type\":")
        Self.writeJSONString(type, to: &buffer)
        buffer.writeStaticString(",\"title\":")
        Self.writeJSONString(title, to: &buffer)
        buffer.writeStaticString(",\"status\":")
        buffer.writeString(String(status.code))
        if let detail {
            buffer.writeStaticString(",\"detail\":")
            Self.writeJSONString(detail, to: &buffer)
        }
        buffer.writeStaticString(",\"instance\":\"urn:portico:request:")
        Self.writeJSONStringContent(requestID, to: &buffer)
        buffer.writeStaticString("\"")
        for (key, value) in extensions {
            buffer.writeStaticString(",")
            Self.writeJSONString(key, to: &buffer)
            buffer.writeStaticString(":")
            Self.writeJSONString(value, to: &buffer)
        }
        buffer.writeStaticString("}")
        return buffer
    }

    /// The complete response head for this problem.
    func head(requestID: String, contentLength: Int, version: HTTPVersion = .http1_1) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/problem+json")
        headers.add(name: "content-length", value: String(contentLength))
        headers.add(name: "x-request-id", value: requestID)
        headers.add(name: "cache-control", value: "no-store")
        if closesConnection { headers.add(name: "connection", value: "close") }
        for (name, value) in self.headers { headers.add(name: name, value: value) }
        return HTTPResponseHead(version: version, status: status, headers: headers)
    }

    /// The whole response as raw HTTP/1.1 bytes, for handlers that sit below the HTTP codec.
    func rawResponse(requestID: String) -> ByteBuffer {
        let body = body(requestID: requestID)
        let head = head(requestID: requestID, contentLength: body.readableBytes)
        var text = "HTTP/1.1 \(head.status.code) \(head.status.reasonPhrase)\r\n"
        for (name, value) in head.headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        var buffer = ByteBuffer(string: text)
        buffer.writeImmutableBuffer(body)
        return buffer
    }

    /// Writes `text` as a JSON string literal (RFC 8259 §7).
    static func writeJSONString(_ text: String, to buffer: inout ByteBuffer) {
        buffer.writeStaticString("\"")
        writeJSONStringContent(text, to: &buffer)
        buffer.writeStaticString("\"")
    }

    /// Writes `text` escaped for the inside of a JSON string: quote, backslash and control
    /// characters are escaped; everything else, UTF-8 included, is copied as is.
    static func writeJSONStringContent(_ text: String, to buffer: inout ByteBuffer) {
        let needsEscaping = text.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        guard needsEscaping else {
            buffer.writeString(text)
            return
        }
        let hex: StaticString = "0123456789abcdef"
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): buffer.writeStaticString("\\\"")
            case UInt8(ascii: "\\"): buffer.writeStaticString("\\\\")
            case UInt8(ascii: "\n"): buffer.writeStaticString("\\n")
            case UInt8(ascii: "\r"): buffer.writeStaticString("\\r")
            case UInt8(ascii: "\t"): buffer.writeStaticString("\\t")
            case 0..<0x20:
                buffer.writeStaticString("\\u00")
                buffer.writeInteger(hex.utf8Start[Int(byte >> 4)])
                buffer.writeInteger(hex.utf8Start[Int(byte & 0xF)])
            default:
                buffer.writeInteger(byte)
            }
        }
    }
}

/// The problems the gateway itself answers with. Each `type` is part of the public contract.
extension Problem {
    static func malformedRequest(_ detail: String) -> Problem {
        Problem(
            type: typePrefix + "malformed-request", title: "Malformed request", status: .badRequest, detail: detail, closesConnection: true)
    }

    /// RFC 9110 §15.5.20: the request was sent on a connection established for another server;
    /// a client may retry it on a new connection.
    static func misdirectedRequest() -> Problem {
        Problem(
            type: typePrefix + "misdirected-request", title: "Misdirected request", status: .misdirectedRequest,
            detail: "The Host of this request selects another certificate than the one this TLS connection was made for; "
                + "send it on a connection made for that host.")
    }

    static func badRequest(_ detail: String) -> Problem {
        Problem(type: typePrefix + "bad-request", title: "Bad request", status: .badRequest, detail: detail)
    }

    static func headTooLarge(_ detail: String) -> Problem {
        Problem(
            type: typePrefix + "request-header-fields-too-large", title: "Request header fields too large",
            status: .requestHeaderFieldsTooLarge, detail: detail, closesConnection: true)
    }

    static func bodyTooLarge(limit: Int) -> Problem {
        Problem(
            type: typePrefix + "payload-too-large", title: "Request body too large", status: .payloadTooLarge,
            detail: "The request body is larger than this gateway accepts (\(limit) bytes).",
            extensions: [("maxBodyBytes", String(limit))], closesConnection: true)
    }

    static func expectationFailed(_ expectation: String) -> Problem {
        Problem(
            type: typePrefix + "expectation-failed", title: "Expectation failed", status: .expectationFailed,
            detail: "The expectation \"\(expectation)\" is not supported; only 100-continue is.", closesConnection: true)
    }

    static func requestTimeout() -> Problem {
        Problem(
            type: typePrefix + "request-timeout", title: "Request timeout", status: .requestTimeout,
            detail: "The request was not received in time.", closesConnection: true)
    }

    static func notFound(path: String) -> Problem {
        Problem(type: typePrefix + "no-route", title: "No such service", status: .notFound, detail: "No service is published at \(path).")
    }

    static func locatorUnavailable() -> Problem {
        Problem(
            type: typePrefix + "locator-unavailable", title: "Service locator unavailable", status: .serviceUnavailable,
            detail: "The service locator cannot be signed right now; keep using the last document you verified.")
    }

    static func methodNotAllowed(allowed: String) -> Problem {
        var problem = Problem(
            type: typePrefix + "method-not-allowed", title: "Method not allowed", status: .methodNotAllowed,
            detail: "This resource answers \(allowed) only.")
        problem.headers = [("allow", allowed)]
        return problem
    }

    static func unknownVersion(_ version: String, service: String, available: [Int]) -> Problem {
        Problem(
            type: typePrefix + "unknown-api-version", title: "Unknown API version", status: .notFound,
            detail: "Service \(service) has no version \(version); available: \(available.map(String.init).joined(separator: ", ")).",
            extensions: [("service", service)])
    }

    /// The path's `{version}` segment and the `apiVersion` query parameter (or two of those) name
    /// different versions: which one the backend reads is anybody's guess.
    static func conflictingVersions(service: String) -> Problem {
        Problem(
            type: typePrefix + "conflicting-api-versions", title: "Conflicting API versions", status: .badRequest,
            detail: "The request names more than one API version (in its path and its apiVersion parameter); name one.",
            extensions: [("service", service)])
    }

    /// The app is older than the service's `minimumClientVersion`. Worded for the app's user: an
    /// app can show `title` and `detail` as they are.
    ///
    /// RFC 9110 §15.5.22 has a 426 name the protocol to upgrade to in `Upgrade`; what must be
    /// upgraded here is the app, not the protocol, so no `Upgrade` field is sent (a client would
    /// otherwise try to switch protocols).
    static func upgradeRequired(service: String, minimum: String) -> Problem {
        Problem(
            type: typePrefix + "upgrade-required", title: "Update required", status: .upgradeRequired,
            detail: "This version of the app is no longer supported. Please update the app to version \(minimum) or later.",
            extensions: [("service", service), ("minimumClientVersion", minimum)])
    }

    static func invalidClientVersion(header: String) -> Problem {
        Problem(
            type: typePrefix + "invalid-client-version", title: "Invalid client version", status: .badRequest,
            detail: "\(header) must be an app version such as 2.4.1, 2.4 or 2.4.1-beta.2.", extensions: [("header", header)])
    }

    static func clientVersionRequired(header: String, service: String) -> Problem {
        Problem(
            type: typePrefix + "client-version-required", title: "Client version required", status: .badRequest,
            detail: "Service \(service) needs the app's version in \(header) (such as 2.4.1), or an API version in the request.",
            extensions: [("header", header), ("service", service)])
    }

    static func badGateway(backend: String) -> Problem {
        Problem(
            type: typePrefix + "backend-unavailable", title: "Backend unavailable", status: .badGateway,
            detail: "The backend \(backend) could not be reached or gave no valid answer.", extensions: [("backend", backend)])
    }

    /// 503, at once, when every target of a backend is down (failing its health checks, or ejected
    /// for failing requests): no request waits for a timeout to learn it. `Retry-After` is when
    /// the soonest target may be back.
    static func backendDown(backend: String, retryAfter: Int64) -> Problem {
        var problem = Problem(
            type: typePrefix + "backend-unavailable", title: "Backend unavailable", status: .serviceUnavailable,
            detail: "Every instance of the backend \(backend) is down; retry in \(retryAfter) s.", extensions: [("backend", backend)])
        problem.headers = [("retry-after", String(retryAfter))]
        return problem
    }

    static func gatewayTimeout(backend: String) -> Problem {
        Problem(
            type: typePrefix + "backend-timeout", title: "Backend timeout", status: .gatewayTimeout,
            detail: "The backend \(backend) did not answer in time.", extensions: [("backend", backend)])
    }

    /// A request stage failed instead of answering (a bug, or an unexpected error of something it
    /// waited on); the detail names no internals.
    static func stageFailed() -> Problem {
        Problem(
            type: typePrefix + "internal-error", title: "Internal error", status: .internalServerError,
            detail: "The gateway could not finish checking this request; retry, and report the request id if it persists.")
    }

    // MARK: Authentication

    static func apiKeyRequired(header: String) -> Problem {
        unauthorized(
            "api-key-required", title: "API key required", detail: "This service requires an API key: send \(header): <key id>.<secret>.",
            challenge: "APIKey header=\"\(header)\"")
    }

    /// The same answer for an unknown key id and a wrong secret.
    static func apiKeyInvalid(header: String) -> Problem {
        unauthorized(
            "api-key-invalid", title: "Invalid API key", detail: "The API key in \(header) is not valid.",
            challenge: "APIKey header=\"\(header)\"")
    }

    static func signatureRequired() -> Problem {
        unauthorized(
            "signature-required", title: "Signature required",
            detail: "This service requires a signed request: send Signature-Input and Signature (RFC 9421, hmac-sha256).")
    }

    static func malformedSignature(_ detail: String) -> Problem {
        Problem(type: typePrefix + "malformed-signature", title: "Malformed signature", status: .badRequest, detail: detail)
    }

    /// A signature that asks for more work than the gateway does for one: more covered components
    /// than `signatures.maxComponents`, or a base longer than `signatures.maxBaseBytes`. Refused
    /// before the work, naming the limit (`limit` and its value).
    static func signatureTooLarge(limit: String, value: Int, detail: String) -> Problem {
        var problem = unauthorized("signature-too-large", title: "Signature too large", detail: detail)
        problem.extensions = [("limit", limit), (limit, String(value))]
        return problem
    }

    /// A well-formed signature that lacks a parameter or a component the policy requires.
    static func signatureIncomplete(_ detail: String) -> Problem {
        unauthorized("signature-incomplete", title: "Signature incomplete", detail: detail)
    }

    /// Carries the server's time (in `Date` and in the body) so a client with a wrong clock can correct it.
    static func clockSkew(created: Int64, now: Int64, allowed: Int64) -> Problem {
        let direction = created > now ? "ahead of" : "behind"
        var problem = unauthorized(
            "clock-skew", title: "Clock skew too large",
            detail:
                "The signature's created time is \(abs(created - now)) s \(direction) the server's clock; at most \(allowed) s is allowed.")
        problem.extensions = [("serverTime", String(now))]
        problem.headers.append(("date", HTTPDate.format(now)))
        return problem
    }

    static func signatureExpired(expires: Int64, now: Int64) -> Problem {
        var problem = unauthorized(
            "signature-expired", title: "Signature expired", detail: "The signature expired \(now - expires) s ago (expires=\(expires)).")
        problem.extensions = [("serverTime", String(now))]
        problem.headers.append(("date", HTTPDate.format(now)))
        return problem
    }

    /// The same answer for an unknown key id, a wrong secret and an altered request.
    static func signatureInvalid() -> Problem {
        unauthorized(
            "signature-invalid", title: "Invalid signature",
            detail: "The signature does not match the request. Check the secret, and that the request was not changed after signing.")
    }

    static func signatureReplayed() -> Problem {
        unauthorized(
            "signature-replayed", title: "Replayed signature",
            detail: "This nonce was already used with this key; sign every request with a fresh nonce.")
    }

    static func nonceQuotaExceeded(retryAfter: Int64) -> Problem {
        var problem = Problem(
            type: typePrefix + "replay-quota-exceeded", title: "Too many signed requests for this key", status: .tooManyRequests,
            detail: "This key holds as many live nonces as its share of the replay cache allows; retry once the oldest expires.")
        problem.headers = [("retry-after", String(retryAfter))]
        return problem
    }

    static func nonceStoreFull(retryAfter: Int64) -> Problem {
        var problem = Problem(
            type: typePrefix + "replay-cache-full", title: "Signed requests temporarily refused", status: .serviceUnavailable,
            detail: "The gateway cannot remember more nonces right now, so it cannot rule out a replay; retry later.")
        problem.headers = [("retry-after", String(retryAfter))]
        return problem
    }

    static func keyRevoked() -> Problem {
        Problem(type: typePrefix + "key-revoked", title: "Key revoked", status: .forbidden, detail: "This API key has been revoked.")
    }

    static func keyNotAllowed(service: String) -> Problem {
        Problem(
            type: typePrefix + "key-not-allowed", title: "Service not allowed for this key", status: .forbidden,
            detail: "This API key may not call the service \(service).", extensions: [("service", service)])
    }

    /// The client's address is not one the service (or the key) accepts. The address itself is not
    /// echoed: the client knows it, and a proxy's view of it is not the client's business.
    static func addressRefused(service: String, byKey: Bool = false) -> Problem {
        Problem(
            type: typePrefix + "address-refused", title: "Address not allowed", status: .forbidden,
            detail: byKey
                ? "This API key may not be used from this client address."
                : "The service \(service) does not accept requests from this client address.",
            extensions: [("service", service)])
    }

    /// A CORS preflight the service's `cors` does not allow.
    static func corsRefused(service: String, reason: String) -> Problem {
        Problem(
            type: typePrefix + "cors-refused", title: "Cross-origin request not allowed", status: .forbidden, detail: reason,
            extensions: [("service", service)])
    }

    static func contentDigestMismatch() -> Problem {
        Problem(
            type: typePrefix + "content-digest-mismatch", title: "Content-Digest mismatch", status: .badRequest,
            detail: "The request body does not match its Content-Digest; it was changed or truncated on the way.")
    }

    /// A 401 with the `WWW-Authenticate` challenge RFC 9110 §11.6.1 requires (by default, the
    /// signature one).
    static func unauthorized(
        _ type: String, title: String, detail: String, challenge: String = "Signature realm=\"portico\", alg=\"hmac-sha256\""
    ) -> Problem {
        var problem = Problem(type: typePrefix + type, title: title, status: .unauthorized, detail: detail)
        problem.headers = [("www-authenticate", challenge)]
        return problem
    }

    static func shuttingDown() -> Problem {
        Problem(
            type: typePrefix + "shutting-down", title: "Shutting down", status: .serviceUnavailable,
            detail: "The gateway is shutting down; retry on another instance.", closesConnection: true)
    }
}
