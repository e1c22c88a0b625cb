import NIOHTTP1
import PorticoHTTP
import Testing

@testable import Portico

/// The `Connection` field's list (RFC 9110 §7.6.1), read over bytes: which fields it makes
/// hop-by-hop, and the optional whitespace around its elements.
@Suite("Connection-listed fields")
struct ConnectionListTests {
    @Test("every Connection field's elements are listed, lowercased and trimmed; close and keep-alive are left out")
    func listed() {
        var headers = HTTPHeaders()
        headers.add(name: "Connection", value: " X-Hop ,\tKeep-Alive,, close ,x-other\t")
        headers.add(name: "x-hop", value: "1")
        headers.add(name: "CONNECTION", value: "Upgrade")
        headers.add(name: "connection", value: "")
        #expect(ProxyForwarding.connectionListed(headers) == ["x-hop", "x-other", "upgrade"])
        #expect(ProxyForwarding.connectionListed(HTTPHeaders([("Connection", "keep-alive")])).isEmpty)
        #expect(ProxyForwarding.connectionListed(HTTPHeaders([("Connection", " , ,")])).isEmpty)
        #expect(ProxyForwarding.connectionListed(HTTPHeaders([("X-Connection", "x-hop")])).isEmpty)
    }

    @Test("optional whitespace is spaces and tabs at either end, nothing else, and never inside")
    func trimming() {
        #expect(" \t a b \t ".dropFirst(0).trimmingOptionalWhitespace() == "a b")
        #expect("\t\t".dropFirst(0).trimmingOptionalWhitespace() == "")
        #expect("".dropFirst(0).trimmingOptionalWhitespace() == "")
        #expect("\u{00A0}x\n".dropFirst(0).trimmingOptionalWhitespace() == "\u{00A0}x\n")
        #expect(" é ".dropFirst(0).trimmingOptionalWhitespace() == "é")
        // A piece of a longer value keeps its own bounds.
        let value = "a, b ,c"
        let middle = value[value.index(value.startIndex, offsetBy: 2)..<value.index(value.startIndex, offsetBy: 5)]
        #expect(middle.trimmingOptionalWhitespace() == "b")
        #expect(HeaderName.matches(middle.trimmingOptionalWhitespace(), "b"))
        #expect(!HeaderName.matches(" b"[...], "b"))
    }
}
