/// Entity tags (RFC 9110 §8.8.3) as `If-None-Match` compares them: weakly, so `W/"x"` and `"x"`
/// are the same tag. The service locator and the response cache answer 304s through it.
public enum EntityTag {
    /// RFC 9110 §8.8.3.2: the same opaque tag, either or both weak.
    public static func weaklyEqual(_ a: Substring, _ b: Substring) -> Bool {
        opaque(a) == opaque(b)
    }

    /// Whether `If-None-Match`'s lines (`*`, or lists of tags) name `etag`.
    public static func noneMatchNames(_ lines: some Sequence<some StringProtocol>, etag: String) -> Bool {
        for line in lines {
            for tag in Substring(line).split(separator: ",") {
                let tag = tag.trimmingOptionalWhitespace()
                if tag == "*" || weaklyEqual(tag, etag[...]) { return true }
            }
        }
        return false
    }

    /// `etag` made weak (`W/` before a strong one): what a transformed representation carries,
    /// since its bytes are no longer the ones the strong tag stood for.
    public static func weakened(_ etag: String) -> String {
        etag.hasPrefix("W/") ? etag : "W/" + etag
    }

    private static func opaque(_ tag: Substring) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : tag
    }
}
