/// A service's path prefix split into segments, one of which may be the `{version}` placeholder.
///
/// Matching works on raw (still percent-encoded) path segments and only at segment boundaries:
/// `/api/quotes` matches `/api/quotes` and `/api/quotes/AAPL`, never `/api/quotesx`.
public struct PathTemplate: Sendable, Hashable {
    public enum Segment: Sendable, Hashable {
        case literal(String)
        case version
    }

    public let segments: [Segment]

    /// `nil` when the text is not a valid template.
    public init?(_ path: String) {
        guard path.hasPrefix("/") else { return nil }
        if path == "/" {
            segments = []
            return
        }
        var segments: [Segment] = []
        for part in path.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            if part == "{version}" {
                segments.append(.version)
            } else if part.isEmpty || part == "." || part == ".." || part.contains("{") || part.contains("}") {
                return nil
            } else {
                segments.append(.literal(String(part)))
            }
        }
        guard segments.filter({ $0 == .version }).count <= 1 else { return nil }
        self.segments = segments
    }

    /// Same text for templates that match the same paths (used to find duplicate routes).
    public var canonical: String {
        "/" + segments.map { if case .literal(let text) = $0 { text } else { "{version}" } }.joined(separator: "/")
    }

    /// The template without its `{version}` segment (`/api/quotes` for `/api/{version}/quotes`), or
    /// `nil` if it has none.
    public var withoutVersion: PathTemplate? {
        guard segments.contains(.version) else { return nil }
        return PathTemplate(segments: segments.filter { $0 != .version })
    }

    private init(segments: [Segment]) {
        self.segments = segments
    }

    /// Literal segments count; more literal segments make a more specific route.
    var specificity: Int { segments.count }

    /// What a successful match found in a request path.
    public struct Match: Sendable {
        /// The text of the `{version}` segment, if the template has one.
        public var version: Substring?
        /// The rest of the path after the matched prefix: empty, or starting with `/`.
        public var remainder: Substring
    }

    public func match(_ path: Substring) -> Match? {
        // Segments are split at "/" bytes, as a URL's are: the `Character` view would run grapheme
        // breaking over every path, and would not split where a combining mark follows a "/".
        guard path.utf8.first == UInt8(ascii: "/") else { return nil }
        var rest = path
        var version: Substring?
        for segment in segments {
            // What is left of the path is empty or starts with "/". Empty: the path ended before the
            // template did (`/api` against `/api/{version}/quotes`), so it cannot match.
            guard !rest.isEmpty else { return nil }
            let (text, end) = Self.segment(after: rest)
            switch segment {
            case .literal(let literal):
                // As bytes, as URLs are compared (RFC 3986 §6.2.1): two spellings of one Unicode
                // text (a precomposed letter, or the letter and a combining mark) are two segments.
                guard text.utf8.elementsEqual(literal.utf8) else { return nil }
            case .version:
                guard !text.isEmpty else { return nil }
                version = text
            }
            rest = rest[end...]
        }
        return Match(version: version, remainder: rest)
    }

    /// The text between the "/" that starts `rest` (not empty) and the next "/", and where that
    /// next one is (or the end).
    @inline(__always)
    static func segment(after rest: Substring) -> (text: Substring, end: Substring.Index) {
        let bytes = rest.utf8
        let afterSlash = bytes.index(after: bytes.startIndex)
        let end = bytes[afterSlash...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
        return (rest[afterSlash..<end], end)
    }
}
