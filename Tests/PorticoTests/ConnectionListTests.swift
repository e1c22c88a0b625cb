import NIOHTTP1
import PorticoHTTP
import PorticoUpstream
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

    @Test("a backend's fields read as lines list the same names as read as pairs")
    func listedFromLines() {
        let values = [
            " X-Hop ,\tKeep-Alive,, close ,x-other\t", "keep-alive", " , ,", "", "a,,b", "x-bar,", ",x-bar", "Upgrade", "CLOSE",
        ]
        for value in values {
            let pairs = HTTPHeaders([("Connection", value), ("X-Other", "1")])
            #expect(ProxyForwarding.connectionListed(FieldLines(pairs)) == ProxyForwarding.connectionListed(pairs), "\(value)")
        }
        var lines = FieldLines()
        lines.add(name: "Connection", value: "x-one")
        lines.add(name: "x-one", value: "1")
        lines.add(name: "connection", value: "X-Two, keep-alive")
        #expect(ProxyForwarding.connectionListed(lines) == ["x-one", "x-two"])
    }

    @Test("a list read in place gives each element, empty ones too, without the spaces and tabs around it")
    func elementsInPlace() {
        func elements(_ value: String) -> [String] {
            var found: [String] = []
            var bytes = Array(value.utf8)
            bytes.withUnsafeMutableBytes { raw in
                HTTP1Syntax.forEachElement(of: UnsafeRawBufferPointer(raw)) { found.append(String(decoding: $0, as: UTF8.self)) }
            }
            return found
        }
        #expect(elements("keep-alive") == ["keep-alive"])
        #expect(elements(" a ,\tb\t,, c d ") == ["a", "b", "", "c d"])
        #expect(elements("") == [""])
        #expect(elements("a,") == ["a", ""])
        #expect(elements(" ") == [""])
    }

    @Test("a set of names finds a name read as bytes whatever its case, and nothing that only shares a prefix or a length")
    func nameSet() {
        let set = HeaderNameSet(["connection", "te", "x-request-id"])
        func contains(_ name: String) -> Bool {
            var bytes = Array(name.utf8)
            return bytes.withUnsafeMutableBytes { set.contains(bytes: UnsafeRawBufferPointer($0)) }
        }
        #expect(contains("Connection") && contains("TE") && contains("x-request-id") && contains("X-Request-ID"))
        #expect(!contains("t") && !contains("connectio") && !contains("connections") && !contains("x-request-ix") && !contains(""))
        #expect(!HeaderNameSet([]).contains(bytes: UnsafeRawBufferPointer(start: nil, count: 0)))
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
