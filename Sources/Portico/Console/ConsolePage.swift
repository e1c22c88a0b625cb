import Foundation
import NIOHTTP1

/// The operator console: one page on the admin listener, shipped inside the binary (no file to
/// find at run time, no CDN, no build step), drawn by its own script from `GET /admin/console`.
///
/// Its headers keep it to itself: a strict Content Security Policy (only its own script and style,
/// no inline code, no frames, requests to its own origin only), never framed, never sniffed, never
/// cached, no referrer.
enum ConsolePage {
    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// The page or one of its files at `path`, or nil for any other path.
    static func asset(at path: String, token: String) -> AdminAPI.Response? {
        let (body, type): (String, String)
        switch path {
        case "/", "/console", "/console/": (body, type) = (page(token: token), "text/html; charset=utf-8")
        case "/console/console.css": (body, type) = (style, "text/css; charset=utf-8")
        case "/console/console.js": (body, type) = (script, "text/javascript; charset=utf-8")
        default: return nil
        }
        return AdminAPI.Response(
            status: .ok, contentType: type, body: Array(body.utf8),
            headers: [
                ("Content-Security-Policy", contentSecurityPolicy), ("X-Frame-Options", "DENY"), ("Referrer-Policy", "no-referrer"),
            ])
    }

    /// The page with its token: hex, so it needs no escaping in the attribute.
    static func page(token: String) -> String {
        html.replacingOccurrences(of: "{{token}}", with: token)
    }

    /// 32 random bytes in hex, from the system's generator.
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let word = generator.next() as UInt64
            let digits = String(word, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }.joined()
    }
}
