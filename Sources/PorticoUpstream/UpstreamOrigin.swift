import PorticoHTTP

/// The host and port an `http://` request goes to: what picks its connection pool.
///
/// Parsed by hand rather than with Foundation's `URL`: the gateway builds every upstream URL itself
/// (`scheme://host:port/target`), and this runs once per proxied request on the event loop, so it
/// only splits the string and allocates the two pieces it hands on.
struct UpstreamOrigin: Hashable, Sendable, CustomStringConvertible {
    /// Without brackets for IPv6 literals (what a socket address wants).
    var host: String
    var port: Int

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// A URL taken apart for an HTTP/1.1 request line.
    struct Parsed {
        var origin: UpstreamOrigin
        /// Path and query as written in the URL, no fragment: a slice of it, not a copy (the NIO
        /// client writes it into the head as it is). Empty or starting with `?` when the URL has
        /// no path: ``slashFirst`` then puts a `/` before it.
        var target: Substring
        var slashFirst: Bool
        /// `host[:port]` exactly as the URL spells it, for a `Host` field the caller did not set.
        var authority: Substring

        /// The request-target, as a string (`/` when the URL has no path).
        var requestTarget: String { slashFirst ? "/" + target : String(target) }
    }

    /// Splits an absolute `http://` URL; `https://` and anything else is refused with the reason,
    /// since this client speaks plain HTTP/1.1 only (TLS backends go through libcurl).
    static func parse(_ url: String) -> Result<Parsed, UpstreamError> {
        let prefix = "http://"
        guard url.utf8.count > prefix.utf8.count,
            url.utf8.prefix(prefix.utf8.count).elementsEqual(prefix.utf8, by: { lowercased($0) == $1 })
        else {
            let reason =
                url.lowercased().hasPrefix("https://")
                ? "https URLs need the curl client (the NIO client has no TLS)" : "not an absolute http:// URL"
            return .failure(UpstreamError(.invalidRequest, detail: "\(reason): \(url)"))
        }
        let rest = url.utf8.dropFirst(prefix.utf8.count)
        let authorityEnd =
            rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        let authority = Substring(url.utf8[rest.startIndex..<authorityEnd])
        guard let origin = origin(of: authority) else {
            return .failure(UpstreamError(.invalidRequest, detail: "no usable host and port in \(url)"))
        }
        var targetEnd = url.utf8.endIndex
        if let fragment = url.utf8[authorityEnd...].firstIndex(of: UInt8(ascii: "#")) { targetEnd = fragment }
        let target = Substring(url.utf8[authorityEnd..<targetEnd])
        let slashFirst = target.utf8.first != UInt8(ascii: "/")
        return .success(Parsed(origin: origin, target: target, slashFirst: slashFirst, authority: authority))
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port`; no user information. Read as bytes: the
    /// `Character` view's grapheme breaking cost more than the rest of the request's URL work.
    private static func origin(of authority: Substring) -> UpstreamOrigin? {
        let bytes = authority.utf8
        guard !bytes.isEmpty, !bytes.contains(UInt8(ascii: "@")) else { return nil }
        let host: Substring.UTF8View
        var portText: Substring.UTF8View?
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            host = bytes[bytes.index(after: bytes.startIndex)..<close]
            let after = bytes[bytes.index(after: close)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = bytes.lastIndex(of: UInt8(ascii: ":")) {
            host = bytes[..<colon]
            portText = bytes[bytes.index(after: colon)...]
        } else {
            host = bytes
        }
        guard !host.isEmpty else { return nil }
        var port = 80
        if let portText, !portText.isEmpty {
            guard let value = DecimalDigits.value(of: portText, maxDigits: 5), (1...65535).contains(value) else { return nil }
            port = value
        }
        return UpstreamOrigin(host: String(Substring(host)), port: port)
    }

    @inline(__always)
    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}
