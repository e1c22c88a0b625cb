import Foundation

/// Which text encodings an XML body may be in.
///
/// The DOCTYPE scan (``XMLNode/declaresDocumentType(_:)``) sees `<!DOCTYPE` only where each ASCII
/// character is its own byte, or that byte beside NULs. The parser (libxml2, behind `XMLParser`)
/// reads more than that: EBCDIC, recognised from the body's first four bytes (`<?xm` in EBCDIC:
/// `4C 6F A7 94`), and any encoding the XML declaration names, through iconv (`UTF-7`,
/// `ISO-2022-JP`, `IBM037`, …), in which the declaration can be spelled so that the scan never
/// sees it (`+ADw-!DOCTYPE` in UTF-7). So only the encodings the scan can read are accepted:
/// UTF-8, UTF-16 and UTF-32 (with or without `LE`/`BE`), US-ASCII and ISO-8859-1 (also named
/// `ASCII`, `ISO_8859-1`, `Latin1`), in any letter case. ASCII and ISO-8859-1 keep every ASCII
/// character as its byte; UTF-16 and UTF-32 put NULs beside it, which the scan skips. A body
/// without a declaration, or whose declaration names no encoding, is UTF-8 or what its first
/// bytes say (a byte-order mark, or NULs around `<`), all of which the scan reads.
extension XMLNode {
    /// Why `data`'s encoding is not accepted, or `nil` when it is.
    static func encodingRefusal(_ data: Data) -> String? {
        if data.starts(with: ebcdicSignature) { return "EBCDIC text is not accepted" }
        let names = declaredEncodings(data)
        guard let refused = names.first(where: { !acceptedEncodings.contains($0.uppercased()) }) else { return nil }
        if refused.isEmpty { return "the XML declaration's encoding cannot be read" }
        // The name is the backend's text: only its start goes into a log line or a problem.
        let shown = refused.count > 40 ? refused.prefix(40) + "…" : refused[...]
        return "the encoding \"\(shown)\" is not accepted (UTF-8, UTF-16, UTF-32, US-ASCII or ISO-8859-1 only)"
    }

    /// `<?xm` in EBCDIC, from which libxml2 takes a body to be EBCDIC.
    private static let ebcdicSignature: [UInt8] = [0x4C, 0x6F, 0xA7, 0x94]

    private static let acceptedEncodings: Set<String> = [
        "UTF-8", "UTF-16", "UTF-16LE", "UTF-16BE", "UTF-32", "UTF-32LE", "UTF-32BE", "US-ASCII", "ASCII", "ISO-8859-1",
        "ISO_8859-1", "LATIN1",
    ]

    /// The names every `encoding=` in the XML declaration gives (an empty name where one cannot
    /// be read); none when the body has no declaration or it names no encoding.
    ///
    /// Read as the DOCTYPE scan reads: NUL bytes are skipped, so the declaration is found in
    /// UTF-16 and UTF-32 text too. A byte-order mark and white space before `<?xml` are passed
    /// over, and `<?xml` and `encoding` are matched in any letter case: a parser would not take
    /// such a declaration for one, but refusing what it names costs nothing. Every `encoding` in
    /// the declaration counts, even one inside another value, so no spelling the parser might
    /// read differently lets a name through.
    static func declaredEncodings(_ data: Data) -> [String] {
        var bytes = data.lazy.filter { $0 != 0 }.makeIterator()
        var next = bytes.next()
        // A byte-order mark (EF BB BF; FE FF or FF FE, with UTF-32's NULs skipped), then white space.
        while let byte = next, [0xEF, 0xBB, 0xBF, 0xFE, 0xFF].contains(byte) { next = bytes.next() }
        while let byte = next, isSpace(byte) { next = bytes.next() }
        for expected in "<?xml".utf8 {
            guard let byte = next, lowercased(byte) == expected else { return [] }
            next = bytes.next()
        }
        guard let first = next, isSpace(first) else { return [] }
        // The declaration, up to its `?>` (or the body's end).
        var declaration: [UInt8] = []
        while let byte = next {
            if byte == UInt8(ascii: ">"), declaration.last == UInt8(ascii: "?") { break }
            declaration.append(byte)
            next = bytes.next()
        }
        return encodingValues(in: declaration)
    }

    /// The values of every `encoding = "…"` (or `'…'`) in `declaration`; an empty one where the
    /// keyword is not followed by `=` and a quoted name.
    private static func encodingValues(in declaration: [UInt8]) -> [String] {
        let keyword = Array("encoding".utf8)
        var names: [String] = []
        var index = 0
        while index + keyword.count <= declaration.count {
            guard declaration[index..<index + keyword.count].map(lowercased).elementsEqual(keyword) else {
                index += 1
                continue
            }
            index += keyword.count
            while index < declaration.count, isSpace(declaration[index]) { index += 1 }
            guard index < declaration.count, declaration[index] == UInt8(ascii: "=") else {
                names.append("")
                continue
            }
            index += 1
            while index < declaration.count, isSpace(declaration[index]) { index += 1 }
            guard index < declaration.count, declaration[index] == UInt8(ascii: "\"") || declaration[index] == UInt8(ascii: "'"),
                let close = declaration[(index + 1)...].firstIndex(of: declaration[index])
            else {
                names.append("")
                continue
            }
            names.append(String(decoding: declaration[(index + 1)..<close], as: UTF8.self))
            index = close + 1
        }
        return names
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 0x20 : byte
    }
}
