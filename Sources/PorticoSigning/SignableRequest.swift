/// The parts of an HTTP request a signature base is built from (RFC 9421 §2).
///
/// The server adapts its parsed request head to this, the client library its outgoing request;
/// both then feed the same ``SignatureBase`` code, so they cannot disagree on a byte.
public protocol SignableRequest {
    /// The method as sent, e.g. `GET` (case is significant).
    var method: String { get }
    /// Lowercase `http` or `https`.
    var scheme: String { get }
    /// Host and port as the client addressed them (the `Host` field on HTTP/1.1).
    var authority: String { get }
    /// The request target in origin form: the path and, when present, `?` and the query, exactly as
    /// sent (percent-encoding untouched).
    var requestTarget: String { get }
    /// Where the query (its `?`) starts in ``requestTarget``, as a UTF-8 offset; nil without one.
    /// A request read for several components may find it once (the default searches each time).
    var queryOffset: Int? { get }
    /// Every value of the field `name` (given lowercase), one per field line, in order.
    func fieldValues(_ name: String) -> [String]

    /// The value of the field `name` (given lowercase) when it has exactly one line; `nil` when it
    /// is absent or repeated. The usual case of a covered field, answered without an array.
    func onlyFieldValue(_ name: String) -> String?
}

extension SignableRequest {
    public var queryOffset: Int? { Self.queryOffset(in: requestTarget) }

    /// Where the query starts in `target`, as a byte offset: the target is sliced and copied as
    /// bytes, never through `String` indices.
    public static func queryOffset(in target: String) -> Int? {
        var target = target
        return target.withUTF8 { $0.firstIndex(of: UInt8(ascii: "?")) }
    }

    public func onlyFieldValue(_ name: String) -> String? {
        let lines = fieldValues(name)
        return lines.count == 1 ? lines[0] : nil
    }
}

/// A request held as plain values: what the client library signs, and what tests build.
public struct HTTPRequestParts: SignableRequest, Sendable {
    public var method: String
    public var scheme: String
    public var authority: String
    public var requestTarget: String
    public var fields: [(name: String, value: String)]

    public init(method: String, scheme: String, authority: String, requestTarget: String, fields: [(name: String, value: String)]) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.requestTarget = requestTarget
        self.fields = fields
    }

    public func fieldValues(_ name: String) -> [String] {
        fields.compactMap { Self.equalIgnoringASCIICase($0.name, name) ? $0.value : nil }
    }

    public func onlyFieldValue(_ name: String) -> String? {
        var found: String?
        for field in fields where Self.equalIgnoringASCIICase(field.name, name) {
            guard found == nil else { return nil }
            found = field.value
        }
        return found
    }

    /// Whether `name` equals `lowercase` (already lowercase) ignoring ASCII case, without copying.
    static func equalIgnoringASCIICase(_ name: String, _ lowercase: String) -> Bool {
        guard name.utf8.count == lowercase.utf8.count else { return false }
        var name = name
        var lowercase = lowercase
        return name.withUTF8 { name in
            lowercase.withUTF8 { lowercase in
                for index in 0..<name.count {
                    let byte = name[index]
                    if (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) != lowercase[index] { return false }
                }
                return true
            }
        }
    }
}
