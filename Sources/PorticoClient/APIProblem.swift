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
