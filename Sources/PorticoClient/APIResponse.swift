import Foundation

/// A decoded answer with what the gateway said about it: which API version served it, the request
/// id to quote in a report, and the rate limit's state, so that an app can log the version and slow
/// down before a 429. ``PorticoAPI/send(_:as:)`` and its siblings return the value alone; this is
/// ``PorticoAPI/response(for:as:)``'s.
///
/// An answer served from the façade's cache carries the fields of the stored answer (refreshed by
/// the gateway's 304 when it was revalidated).
public struct APIResponse<Value> {
    public let value: Value
    public let status: Int
    /// `X-API-Version`: the version of the service that answered (the gateway picks it from the
    /// app's version when the request names none).
    public let apiVersion: String?
    /// `X-Request-Id`: the gateway's id of the request, as its access log and its problems name it.
    public let requestID: String?
    /// The limit that admitted the request (`RateLimit` and `RateLimit-Policy`), when one did.
    public let rateLimit: RateLimitState?
    /// Every field of the answer, names lowercased.
    public let headers: [String: String]
}

extension APIResponse: Sendable where Value: Sendable {}

/// One rate limit's state after a request, from the `RateLimit` and `RateLimit-Policy` fields
/// (draft-ietf-httpapi-ratelimit-headers): `"tier:standard";r=19;t=1` and
/// `"tier:standard";q=50;w=1`.
public struct RateLimitState: Sendable, Hashable {
    /// The limit's name, as the gateway gives it (`tier:standard`, say).
    public let policy: String
    /// Requests left before the limit refuses.
    public let remaining: Int
    /// When the limit has room again, at the latest.
    public let resetAfter: Duration
    /// The limit's size and period, when `RateLimit-Policy` names the same limit.
    public let quota: Int?
    public let window: Duration?

    /// Reads the two fields; nil when `RateLimit` is absent or not of this shape.
    init?(rateLimit: String?, policy: String?) {
        guard let rateLimit, let status = Self.item(rateLimit), let remaining = status.parameters["r"].flatMap(Int.init),
            let reset = status.parameters["t"].flatMap(Int.init)
        else { return nil }
        self.policy = status.name
        self.remaining = remaining
        self.resetAfter = .seconds(reset)
        let limit = policy.flatMap(Self.item).flatMap { $0.name == status.name ? $0 : nil }
        quota = limit?.parameters["q"].flatMap(Int.init)
        window = limit?.parameters["w"].flatMap(Int.init).map { .seconds($0) }
    }

    /// The first member of a structured-field list: a quoted name and `;key=value` parameters.
    private static func item(_ field: String) -> (name: String, parameters: [String: String])? {
        let first = field.split(separator: ",", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        var pieces = first.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let quoted = pieces.first, quoted.count >= 2, quoted.hasPrefix("\""), quoted.hasSuffix("\"") else { return nil }
        pieces.removeFirst()
        var parameters: [String: String] = [:]
        for piece in pieces {
            let pair = piece.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { parameters[pair[0]] = pair[1] }
        }
        return (String(quoted.dropFirst().dropLast()), parameters)
    }
}
