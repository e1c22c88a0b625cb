import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// An XML element as a reformer reads it: local name, attributes, text and child elements.
///
/// Built by Foundation's `XMLParser` with namespace processing on, so `<q:Last>` and `<Last>` in
/// a default namespace both have the local name `Last`; the predefined entities and character
/// references are resolved by the parser.
///
/// A document type declaration is refused outright, and with it every entity declaration (which
/// can only stand in one): a feed has no use for them, and they are what external-entity reads
/// (XXE) and entity expansion bombs ("billion laughs") are made of. The parser is also told never
/// to resolve an external entity, and its entity-declaration callbacks fail the parse, so a
/// declaration the byte scan did not see still goes nowhere. A body in an encoding the scan cannot
/// read (EBCDIC, or one its XML declaration names, such as UTF-7) is refused before the scan:
/// see `XMLNode+Encoding.swift`.
public final class XMLNode: Sendable {
    public let name: String
    public let attributes: [String: String]
    public let text: String
    public let children: [XMLNode]

    init(name: String, attributes: [String: String], text: String, children: [XMLNode]) {
        self.name = name
        self.attributes = attributes
        self.text = text
        self.children = children
    }

    /// Parses `data` into its root element.
    static func parse(_ data: Data) throws(ReformError) -> XMLNode {
        if let refusal = encodingRefusal(data) {
            throw ReformError(.malformed(format: .xml, detail: refusal))
        }
        if declaresDocumentType(data) {
            throw ReformError(.malformed(format: .xml, detail: "a DOCTYPE or ENTITY declaration is not accepted"))
        }
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.externalEntityResolvingPolicy = .never
        let builder = Builder()
        parser.delegate = builder
        let parsed = parser.parse()
        guard parsed, builder.failure == nil, let root = builder.root else {
            let detail = builder.failure ?? parser.parserError.map { "\($0.localizedDescription)" } ?? "no root element"
            throw ReformError(.malformed(format: .xml, detail: detail))
        }
        return root
    }

    /// Whether `data` holds `<!DOCTYPE` or `<!ENTITY` (ASCII letters in any case), anywhere.
    ///
    /// NUL bytes are skipped, so the same markers are found in UTF-16 and UTF-32 text. Scanning
    /// the whole body is deliberately blunt: such text inside a comment or CDATA section refuses the
    /// document too, which a data feed never needs, and no prolog has to be parsed to decide.
    static func declaresDocumentType(_ data: Data) -> Bool {
        data.withUnsafeBytes { raw in
            var doctype = 0
            var entity = 0
            for byte in raw where byte != 0 {
                let upper = byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") ? byte - 0x20 : byte
                doctype = advance(doctype, upper, in: doctypeMarker)
                entity = advance(entity, upper, in: entityMarker)
                if doctype == doctypeMarker.count || entity == entityMarker.count { return true }
            }
            return false
        }
    }

    private static let doctypeMarker = Array("<!DOCTYPE".utf8)
    private static let entityMarker = Array("<!ENTITY".utf8)

    /// How much of `marker` is matched after `byte`, given `matched` before it. The markers' first
    /// byte `<` occurs in them only there, so a mismatch restarts at 0, or at 1 on a `<`.
    private static func advance(_ matched: Int, _ byte: UInt8, in marker: [UInt8]) -> Int {
        if byte == marker[matched] { return matched + 1 }
        return byte == marker[0] ? 1 : 0
    }

    /// The value at `path` (see ``Locator/xmlPath(_:)``): an element's text, or an attribute.
    func value(at path: String) -> String? {
        var steps = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var attribute: String?
        if let last = steps.last, last.hasPrefix("@") {
            attribute = String(last.dropFirst())
            steps.removeLast()
        }
        guard let first = steps.first, Self.step(first).name == name else { return nil }
        var node = self
        for step in steps.dropFirst() {
            let (wanted, index) = Self.step(step)
            let matching = node.children.filter { $0.name == wanted }
            guard index < matching.count else { return nil }
            node = matching[index]
        }
        if let attribute { return node.attributes[attribute] }
        return node.text
    }

    /// `Stock[2]` → ("Stock", 2); `Stock` → ("Stock", 0).
    private static func step(_ text: String) -> (name: String, index: Int) {
        guard text.hasSuffix("]"), let open = text.firstIndex(of: "["),
            let index = Int(text[text.index(after: open)..<text.index(before: text.endIndex)])
        else { return (Self.localName(text), 0) }
        return (Self.localName(String(text[..<open])), index)
    }

    /// A path may name `q:Last`; elements are matched by local name.
    private static func localName(_ name: String) -> String {
        name.split(separator: ":").last.map(String.init) ?? name
    }

    private final class Builder: NSObject, XMLParserDelegate {
        struct Open {
            var name: String
            var attributes: [String: String]
            var text = ""
            var children: [XMLNode] = []
        }
        var stack: [Open] = []
        var root: XMLNode?
        var failure: String?
        /// Deeper than this is refused: nesting costs stack in whoever walks the tree.
        static let maxDepth = 256

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            guard stack.count < Self.maxDepth else {
                failure = "elements nested deeper than \(Self.maxDepth)"
                return parser.abortParsing()
            }
            var local: [String: String] = [:]
            for (key, value) in attributes where !key.hasPrefix("xmlns") {
                local[key.split(separator: ":").last.map(String.init) ?? key] = value
            }
            stack.append(Open(name: XMLNode.localName(elementName), attributes: local))
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard !stack.isEmpty else { return }
            stack[stack.count - 1].text += string
        }

        func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
            guard !stack.isEmpty else { return }
            stack[stack.count - 1].text += String(decoding: CDATABlock, as: UTF8.self)
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            guard let open = stack.popLast() else { return }
            let node = XMLNode(
                name: open.name, attributes: open.attributes, text: open.text,
                children: open.children)
            if stack.isEmpty {
                root = node
            } else {
                stack[stack.count - 1].children.append(node)
            }
        }

        func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
            refuse(parser, "the entity declaration \(name)")
        }

        func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?, systemID: String?) {
            refuse(parser, "the entity declaration \(name)")
        }

        func parser(
            _ parser: XMLParser, foundUnparsedEntityDeclarationWithName name: String, publicID: String?, systemID: String?,
            notationName: String?
        ) {
            refuse(parser, "the entity declaration \(name)")
        }

        func parser(_ parser: XMLParser, resolveExternalEntityName name: String, systemID: String?) -> Data? {
            refuse(parser, "the external entity \(name)")
            return nil
        }

        private func refuse(_ parser: XMLParser, _ what: String) {
            if failure == nil { failure = "\(what) is not accepted" }
            parser.abortParsing()
        }

        func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
            if failure == nil { failure = "\(parseError.localizedDescription) at line \(parser.lineNumber)" }
        }
    }
}
