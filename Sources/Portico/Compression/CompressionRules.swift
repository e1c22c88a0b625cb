import NIOHTTP1
import PorticoHTTP
import PorticoPolicy

/// One service's compression, compiled from the policy's `compression` and the service's own:
/// which codings, at which levels, from which length, for which media types.
struct CompressionRules: Sendable {
    /// In the policy's order of preference.
    let algorithms: [ContentCoding]
    let levels: [ContentCoding: Int]
    let minBytes: Int
    private let types: [String]

    init?(_ policy: CompressionPolicy?, service: ServiceCompressionPolicy?) {
        if let service, !service.enabled { return nil }
        guard policy != nil || service != nil else { return nil }
        let policy = policy ?? CompressionPolicy()
        algorithms = policy.algorithms
        var levels: [ContentCoding: Int] = [:]
        for coding in ContentCoding.allCases { levels[coding] = service?.levels[coding] ?? policy.level(coding) }
        self.levels = levels
        minBytes = service?.minBytes ?? policy.minBytes
        types = policy.types
    }

    func level(_ coding: ContentCoding) -> Int { levels[coding] ?? coding.defaultLevel }

    /// The coding the client's `Accept-Encoding` prefers among ours (RFC 9110 §12.5.3): the
    /// highest q-value wins, the policy's order breaks ties, `*` stands for any coding not named,
    /// and `q=0` refuses one. nil when the client accepts none of them (or sent no such field).
    func negotiate(_ request: HTTPHeaders) -> ContentCoding? {
        let lines = request["accept-encoding"]
        guard !lines.isEmpty else { return nil }
        var named: [String: Double] = [:]
        var wildcard: Double?
        for line in lines {
            for element in line.split(separator: ",") {
                let parts = element.split(separator: ";")
                guard let first = parts.first else { continue }
                let name = first.trimmingOptionalWhitespace().lowercased()
                var q = 1.0
                for parameter in parts.dropFirst() {
                    let pair = parameter.trimmingOptionalWhitespace()
                    if pair.lowercased().hasPrefix("q="), let value = Double(pair.dropFirst(2)), (0...1).contains(value) { q = value }
                }
                if name == "*" { wildcard = q } else if named[name] == nil { named[name] = q }
            }
        }
        var best: (coding: ContentCoding, q: Double)?
        for coding in algorithms {
            guard let q = named[coding.rawValue] ?? (coding == .gzip ? named["x-gzip"] : nil) ?? wildcard, q > 0 else { continue }
            if best == nil || q > best!.q { best = (coding, q) }
        }
        return best?.coding
    }

    /// Whether a response of this media type is worth compressing.
    func compresses(contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingOptionalWhitespace().lowercased() } ?? ""
        guard mediaType != "text/event-stream", let slash = mediaType.firstIndex(of: "/") else { return false }
        let type = mediaType[..<slash]
        for pattern in types {
            if pattern == mediaType { return true }
            if pattern.hasSuffix("/*"), pattern.dropLast(2) == type { return true }
            if pattern.hasPrefix("*/*+"), mediaType.hasSuffix(pattern.dropFirst(3)) { return true }
        }
        return false
    }

    /// Whether this response may be compressed at all, whatever the client accepts: a body
    /// that is not already encoded, not a range or an empty answer, not marked `no-transform`,
    /// of a media type worth it and, when its length is known, not shorter than `minBytes`.
    func mayCompress(status: Int, headers: HTTPHeaders, contentLength: Int?) -> Bool {
        guard status >= 200, status != 204, status != 206, status != 304 else { return false }
        if let encoding = headers.first(name: "content-encoding"), encoding.lowercased() != "identity" { return false }
        if headers.contains(name: "content-range") { return false }
        if let length = contentLength, length < max(minBytes, 1) { return false }
        if CacheControl(lines: headers["cache-control"]).noTransform { return false }
        return compresses(contentType: headers.first(name: "content-type"))
    }

    /// The head of a response compressed with `coding`: its new encoding, no length (the
    /// compressed one is not known in advance), `Vary: Accept-Encoding`, and a strong `ETag` made
    /// weak, since the bytes are no longer the representation's (RFC 9110 §8.8.3).
    static func compressedHead(_ headers: inout HTTPHeaders, coding: ContentCoding) {
        headers.add(name: "Content-Encoding", value: coding.rawValue)
        headers.remove(name: "content-md5")
        if let etag = headers.first(name: "etag") { headers.replaceOrAdd(name: "ETag", value: EntityTag.weakened(etag)) }
    }
}
