import Testing

@testable import Portico

@Suite("Path normalisation")
struct PathNormalizerTests {
    static func normalized(_ path: String) -> String? {
        try? PathNormalizer.normalize(path[...]).get().path.description
    }

    static func rejection(_ path: String) -> PathNormalizer.Rejection? {
        if case .failure(let rejection) = PathNormalizer.normalize(path[...]) { return rejection }
        return nil
    }

    @Test("a path in normal form is returned as it is")
    func unchanged() {
        for path in ["/", "/echo", "/echo/a/b", "/api/1/stockquote/AAPL", "/a/%20b", "/a/...", "/a/.b", "/a/b.", "//x", "/a/%C3%A9"] {
            #expect(Self.normalized(path) == path, "\(path)")
        }
    }

    @Test("encoded unreserved characters are decoded and the hex of the rest is uppercased (RFC 3986 §6.2.2)")
    func rfc3986Normalisation() {
        #expect(Self.normalized("/%65cho") == "/echo")
        #expect(Self.normalized("/a/%7E%7euser%2D_") == "/a/~~user-_")
        #expect(Self.normalized("/a/%c3%a9") == "/a/%C3%A9")
        #expect(Self.normalized("/a/%3a%3A") == "/a/%3A%3A")
        #expect(Self.normalized("/a%2eb") == "/a.b")
    }

    /// Every way of writing `.` and `..`, in lower, upper and mixed case.
    static let dotForms: [String] = [".", "..", "%2e", "%2E", "%2e%2e", "%2E%2E", "%2e%2E", "%2E%2e", ".%2e", ".%2E", "%2e.", "%2E."]

    @Test("a dot-segment in any encoding is refused wherever it stands", arguments: dotForms)
    func dotSegmentsRefused(segment: String) {
        for path in ["/\(segment)", "/\(segment)/", "/a/\(segment)", "/a/\(segment)/b", "/\(segment)/a", "/a/b/\(segment)"] {
            #expect(Self.rejection(path) == .dotSegment, "\(path)")
        }
    }

    @Test("encoded slashes and backslashes are reported, not decoded", arguments: ["%2f", "%2F", "%5c", "%5C"])
    func encodedSlashes(slash: String) throws {
        for path in ["/a/\(slash)", "/a/b\(slash)c", "/\(slash)/a", "/a/..\(slash)x"] {
            let result = try PathNormalizer.normalize(path[...]).get()
            #expect(result.hasEncodedSlash, "\(path)")
            #expect(result.path.contains("%2F") || result.path.contains("%5C"), "\(path) -> \(result.path)")
        }
        #expect(try PathNormalizer.normalize("/a/b%20c"[...]).get().hasEncodedSlash == false)
    }

    @Test("broken percent-encoding, raw backslashes and encoded NULs are refused")
    func refused() {
        for path in ["/a%", "/a%2", "/a%zz", "/a/%g0", "/%2"] {
            #expect(Self.rejection(path) == .invalidPercentEncoding, "\(path)")
        }
        #expect(Self.rejection("/a\\..\\b") == .backslash)
        #expect(Self.rejection("/a/%00") == .encodedNul)
    }

    @Test("normalising is idempotent")
    func idempotent() {
        for path in ["/%65cho/%7e", "/a/%c3%a9/%2f", "/x%2Dy/%41%42"] {
            let once = Self.normalized(path)
            #expect(once != nil)
            #expect(once.flatMap(Self.normalized) == once)
        }
    }
}
