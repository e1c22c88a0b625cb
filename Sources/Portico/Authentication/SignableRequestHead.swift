import Foundation
import NIOHTTP1
import PorticoHTTP
import PorticoPolicy
import PorticoSigning

/// A parsed request head seen through the signing module's eyes.
struct SignableRequestHead: SignableRequest {
    let head: HTTPRequestHead
    let scheme: String
    /// The `Host` field (RFC 9421 §2.2.3 takes `@authority` from it for HTTP/1.1).
    let authority: String
    /// Read from the head once: `@path`, `@query` and the required coverage each read them.
    let requestTarget: String
    let queryOffset: Int?

    init(head: HTTPRequestHead, scheme: String) {
        self.init(head: head, scheme: scheme, host: head.headers.first(name: "host"))
    }

    /// `host`: the `Host` field's value, already found (``SignatureHeadFields``).
    init(head: HTTPRequestHead, scheme: String, host: String?) {
        self.head = head
        self.scheme = scheme
        authority = host ?? ""
        requestTarget = head.uri
        queryOffset = Self.queryOffset(in: requestTarget)
    }

    var method: String { head.method.wireName }
    func fieldValues(_ name: String) -> [String] { head.headers[name] }

    func onlyFieldValue(_ name: String) -> String? {
        // By index, reading a value only where the name matches (see ``SignatureHeadFields``).
        let headers = head.headers
        let length = name.utf8.count
        var found: HTTPHeaders.Index?
        for index in headers.indices where headers[index].name.utf8.count == length && HeaderName.matches(headers[index].name, name) {
            guard found == nil else { return nil }
            found = index
        }
        return found.map { headers[$0].value }
    }
}
