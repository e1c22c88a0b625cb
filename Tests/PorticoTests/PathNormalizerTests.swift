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

    /// A dot-segment followed by a path parameter, which Tomcat, Jetty and Spring strip before
    /// removing dot-segments: `..;` is `..` to them.
    static let parameterForms: [String] = dotForms.flatMap { dots in
        ["\(dots);", "\(dots);x", "\(dots);jsessionid=0A1B", "\(dots)%3B", "\(dots)%3bx", "\(dots);a;b"]
    }

    @Test("a dot-segment before a path parameter is refused wherever it stands", arguments: parameterForms)
    func dotSegmentsBeforeParameters(segment: String) {
        for path in ["/\(segment)", "/\(segment)/", "/a/\(segment)", "/a/\(segment)/b", "/\(segment)/a", "/a/b/\(segment)"] {
            #expect(Self.rejection(path) == .dotSegment, "\(path)")
        }
    }

    @Test("path parameters that do not hide a dot-segment are kept")
    func parametersKept() {
        for path in ["/a;b", "/a/b;v=1/c", "/a/...;x", "/a/.x;y", "/a/;x", "/a/x;..", "/a/x;../b", "/a/%3B..", "/a;/b"] {
            #expect(Self.normalized(path) == path, "\(path)")
        }
    }

    @Test("a '#' is refused wherever it stands")
    func fragmentRefused() {
        for path in ["/#", "/a#b/c", "/a/b#", "/#/a", "/a/%2e#"] {
            #expect(Self.rejection(path) == .fragment, "\(path)")
        }
        #expect(Self.normalized("/a/%23b") == "/a/%23b")  // encoded, it is data
    }

    /// Percent-encoded bytes that are not UTF-8: overlong forms of '.' and '/', surrogates, code
    /// points past U+10FFFF, stray continuation bytes, bytes that never start a sequence, and
    /// sequences cut short by the end of a segment or by an ASCII byte.
    static let invalidUTF8: [String] = [
        "%C0%AE", "%C0%AF", "%C1%81", "%E0%80%AE", "%F0%80%80%AE", "%ED%A0%80", "%ED%BF%BF", "%F4%90%80%80", "%F5%80%80%80",
        "%80", "%BF", "%FE", "%FF", "%C3", "%E2%82", "%F0%9F%98", "%C3%28", "%E2%28%A1", "%C3a",
    ]

    @Test("encoded bytes that are not UTF-8 are refused wherever they stand", arguments: invalidUTF8)
    func invalidUTF8Refused(bytes: String) {
        for path in ["/\(bytes)", "/\(bytes)/", "/a/\(bytes)", "/a/x\(bytes)y/b", "/\(bytes)/a"] {
            #expect(Self.rejection(path) == .invalidUTF8, "\(path)")
        }
    }

    @Test("encoded UTF-8 of every length is accepted")
    func validUTF8Accepted() {
        for path in ["/%C3%A9", "/%E2%82%AC", "/%F0%9F%98%80", "/%EF%BF%BF", "/%F4%8F%BF%BF", "/%ED%9F%BF", "/a/%C2%80b"] {
            #expect(Self.normalized(path) == path, "\(path)")
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
