import NIOHTTP1
import PorticoHTTP
import RawStructuredFieldValues

/// The caching directives a response gives this cache: its `CDN-Cache-Control` when it has a
/// valid one (RFC 9213: a field for the caches an operator runs, such as a gateway's, which then
/// ignore `Cache-Control` and `Expires`), else its `Cache-Control`.
struct ResponseDirectives {
    let control: CacheControl
    /// Whether they came from `CDN-Cache-Control`.
    let targeted: Bool

    init(_ headers: HTTPHeaders) {
        if let targeted = Self.targeted(headers) {
            control = targeted
            self.targeted = true
        } else {
            control = CacheControl(lines: headers["cache-control"])
            targeted = false
        }
    }

    /// `CDN-Cache-Control` read as the Structured Field dictionary it is (RFC 9651); nil when
    /// absent or not a valid dictionary, which a cache ignores (RFC 9213 §2.1).
    static func targeted(_ headers: HTTPHeaders) -> CacheControl? {
        let lines = headers["cdn-cache-control"]
        guard !lines.isEmpty else { return nil }
        var parser = StructuredFieldValueParser(Array(lines.joined(separator: ", ").utf8))
        guard let dictionary = try? parser.parseDictionaryFieldValue() else { return nil }
        var control = CacheControl()
        for (name, member) in dictionary {
            guard case .item(let item) = member else { continue }
            func seconds() -> Int? {
                guard case .integer(let value) = item.rfc9651BareItem, value >= 0 else { return nil }
                return Int(min(value, Int64(CacheControl.maxDeltaSeconds)))
            }
            func flag() -> Bool {
                if case .bool(let value) = item.rfc9651BareItem { return value }
                return false
            }
            switch name {
            case "max-age": control.maxAge = seconds() ?? 0
            case "s-maxage": control.sMaxAge = seconds() ?? 0
            case "stale-while-revalidate": control.staleWhileRevalidate = seconds()
            case "stale-if-error": control.staleIfError = seconds()
            case "no-store": control.noStore = flag()
            case "no-cache": control.noCache = flag() || item.rfc9651BareItem.isString
            case "private": control.isPrivate = flag() || item.rfc9651BareItem.isString
            case "public": control.isPublic = flag()
            case "must-revalidate": control.mustRevalidate = flag()
            case "proxy-revalidate": control.proxyRevalidate = flag()
            case "must-understand": control.mustUnderstand = flag()
            case "no-transform": control.noTransform = flag()
            default: continue
            }
        }
        return control
    }
}

extension RFC9651BareItem {
    fileprivate var isString: Bool {
        if case .string = self { return true }
        return false
    }
}
