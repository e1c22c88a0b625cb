/// A content coding the gateway compresses responses with (RFC 9110 §8.4.1).
public enum ContentCoding: String, Sendable, Hashable, CaseIterable {
    /// Brotli (RFC 7932).
    case br
    case gzip
    /// Zstandard (RFC 8878).
    case zstd

    /// The levels a policy may choose, fastest first.
    public var levels: ClosedRange<Int> {
        switch self {
        case .gzip: 1...9
        case .br: 0...11
        // Above 19 zstd's levels need windows of tens of megabytes per response.
        case .zstd: 1...19
        }
    }

    /// What it compresses at unless the policy says otherwise: fast enough to keep up with a
    /// gateway's traffic, most of the gain kept.
    public var defaultLevel: Int {
        switch self {
        case .gzip: 6
        case .br: 4
        case .zstd: 3
        }
    }
}

/// Response compression (`compression:` at the top level): on for every service once present,
/// unless a service says `compression: false`. The client's `Accept-Encoding` chooses among
/// ``algorithms`` (its q-values first, then this order).
public struct CompressionPolicy: Sendable, Hashable {
    public var algorithms: [ContentCoding] = [.br, .gzip]
    /// Bodies shorter than this go as they are: compressing them saves less than it costs.
    public var minBytes: Int = 1024
    public var levels: [ContentCoding: Int] = [:]
    /// The media types compressed (`type/subtype`, `type/*`, or a `+json`-style suffix as
    /// `*/*+json`); what is already compressed (images, archives) is not among them.
    public var types: [String] = CompressionPolicy.defaultTypes

    public static let defaultTypes = [
        "text/*", "application/json", "application/problem+json", "application/xml", "application/javascript", "application/x-ndjson",
        "image/svg+xml", "*/*+json", "*/*+xml",
    ]

    public init() {}

    /// The level `coding` runs at.
    public func level(_ coding: ContentCoding) -> Int { levels[coding] ?? coding.defaultLevel }
}

/// One service's compression: `false` turns it off; levels and `minBytes` override the top level's.
public struct ServiceCompressionPolicy: Sendable, Hashable {
    public var enabled: Bool = true
    public var levels: [ContentCoding: Int] = [:]
    public var minBytes: Int?

    public init(enabled: Bool = true, levels: [ContentCoding: Int] = [:], minBytes: Int? = nil) {
        self.enabled = enabled
        self.levels = levels
        self.minBytes = minBytes
    }
}
