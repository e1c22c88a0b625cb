import Foundation

/// An RFC 9457 problem, as the gateway (or a backend behind it) answered it.
///
/// The gateway's problems have a stable `type` (`urn:portico:problem:rate-limited`…) to branch on;
/// `title` and `detail` are text for people. Extension members (`serverTime`,
/// `minimumClientVersion`, `service`…) are kept as text.
public struct APIProblem: Sendable, Hashable {
    /// The problem's type URI; `about:blank` when the body names none (RFC 9457 §3.1.1).
    public var type: String
    /// The status the body states, which should be the answer's own.
    public var status: Int?
    public var title: String?
    public var detail: String?
    /// The gateway puts the request id here (`urn:portico:request:…`): quote it in a bug report.
    public var instance: String?
    /// Every other member whose value is a string, a number or a boolean, as text.
    public var extensions: [String: String]

    public init(
        type: String = "about:blank", status: Int? = nil, title: String? = nil, detail: String? = nil, instance: String? = nil,
        extensions: [String: String] = [:]
    ) {
        self.type = type
        self.status = status
        self.title = title
        self.detail = detail
        self.instance = instance
        self.extensions = extensions
    }

    /// The gateway's own types start with this.
    public static let porticoTypePrefix = "urn:portico:problem:"

    /// The last part of a gateway type (`clock-skew` for `urn:portico:problem:clock-skew`), `nil` for
    /// other types.
    public var porticoType: String? {
        type.hasPrefix(Self.porticoTypePrefix) ? String(type.dropFirst(Self.porticoTypePrefix.count)) : nil
    }

    /// The gateway's type, as one of ``Kind``'s constants to compare with (`nil` for a backend's own
    /// problem types).
    public var kind: Kind? { porticoType.map(Kind.init(rawValue:)) }

    /// A gateway problem type, by its last part: compare ``APIProblem/kind`` with the constants
    /// rather than with strings. New types may appear; an unknown one is still a `Kind`.
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // 401: the request did not authenticate.
        /// The signature does not match (a wrong secret, an unknown key id, a request changed after signing).
        public static let signatureInvalid = Kind(rawValue: "signature-invalid")
        /// No signature was sent.
        public static let signatureRequired = Kind(rawValue: "signature-required")
        /// The signature lacks a parameter or a component the gateway requires.
        public static let signatureIncomplete = Kind(rawValue: "signature-incomplete")
        /// The signature's `created` is too far from the gateway's clock: `extensions["serverTime"]` has it.
        public static let clockSkew = Kind(rawValue: "clock-skew")
        /// The signature's `expires` has passed.
        public static let signatureExpired = Kind(rawValue: "signature-expired")
        /// The nonce was used before: sign each request afresh.
        public static let signatureReplayed = Kind(rawValue: "signature-replayed")
        /// The API key is unknown or its secret wrong.
        public static let apiKeyInvalid = Kind(rawValue: "api-key-invalid")
        /// No API key was sent.
        public static let apiKeyRequired = Kind(rawValue: "api-key-required")
        /// The bearer token is expired.
        public static let tokenExpired = Kind(rawValue: "token-expired")
        /// The bearer token does not verify or names an issuer or key the gateway does not take.
        public static let tokenInvalid = Kind(rawValue: "token-invalid")
        /// None of the credentials the service takes was sent.
        public static let credentialsRequired = Kind(rawValue: "credentials-required")
        // 403: genuine credentials, not allowed.
        /// The key has been revoked.
        public static let keyRevoked = Kind(rawValue: "key-revoked")
        /// The key may not call this service.
        public static let keyNotAllowed = Kind(rawValue: "key-not-allowed")
        /// The client's address may not call this service (or use this key).
        public static let addressRefused = Kind(rawValue: "address-refused")
        /// The token lacks a scope the service requires.
        public static let tokenScopeInsufficient = Kind(rawValue: "token-scope-insufficient")
    }

    /// Reads a problem body; `nil` unless the content type is `application/problem+json` and the
    /// body a JSON object.
    static func parse(contentType: String?, body: Data) -> APIProblem? {
        guard let contentType, contentType.lowercased().hasPrefix("application/problem+json"),
            let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
        else { return nil }
        var problem = APIProblem(type: object["type"] as? String ?? "about:blank")
        problem.status = (object["status"] as? NSNumber)?.intValue
        problem.title = object["title"] as? String
        problem.detail = object["detail"] as? String
        problem.instance = object["instance"] as? String
        for (name, value) in object where !["type", "status", "title", "detail", "instance"].contains(name) {
            if let text = value as? String {
                problem.extensions[name] = text
            } else if let number = value as? NSNumber {
                problem.extensions[name] = number.stringValue
            }
        }
        return problem
    }
}
