import Foundation
import PorticoReform
import Testing

/// Which encodings an XML body may be in: those the DOCTYPE scan can read, and no other.
@Suite("XML encodings")
struct XMLEncodingTests {
    static let reformer = Reformer(format: .xml, mappings: [.init(field: "v", locator: .xmlPath("r/v"))])
    static let contract = Contract(fields: [.init(name: "v", type: .string)])

    /// `text` in EBCDIC (code page 037), for the characters these tests use.
    static func ebcdic(_ text: String) -> Data {
        let rows: [(from: Character, to: Character, first: UInt8)] = [
            ("a", "i", 0x81), ("j", "r", 0x91), ("s", "z", 0xA2), ("A", "I", 0xC1), ("J", "R", 0xD1), ("S", "Z", 0xE2),
            ("0", "9", 0xF0),
        ]
        let single: [Character: UInt8] = [
            " ": 0x40, "<": 0x4C, "?": 0x6F, "=": 0x7E, "\"": 0x7F, ".": 0x4B, ">": 0x6E, "/": 0x61, "-": 0x60, "!": 0x5A,
        ]
        return Data(
            text.map { character in
                if let byte = single[character] { return byte }
                let row = rows.first { $0.from <= character && character <= $0.to }!
                return row.first + UInt8(character.asciiValue! - row.from.asciiValue!)
            })
    }

    static func utf16LE(_ text: String) -> Data {
        Data([0xFF, 0xFE]) + text.data(using: .utf16LittleEndian)!
    }

    static let refused: [(name: String, body: Data, detail: String)] = [
        (
            "UTF-7", Data(#"<?xml version="1.0" encoding="UTF-7"?><r><v>x</v></r>"#.utf8),
            #"the encoding "UTF-7" is not accepted (UTF-8, UTF-16, UTF-32, US-ASCII or ISO-8859-1 only)"#
        ),
        (
            // What UTF-7 is for here: a DOCTYPE the byte scan cannot see.
            "UTF-7 hiding a DOCTYPE",
            Data(#"<?xml version="1.0" encoding="utf-7"?>+ADw-!DOCTYPE r +AFs-+ADw-!ENTITY x +ACI-y+ACI-+AD4-+AF0-+AD4-"#.utf8)
                + Data(#"<r><v>&x;</v></r>"#.utf8),
            #"the encoding "utf-7" is not accepted (UTF-8, UTF-16, UTF-32, US-ASCII or ISO-8859-1 only)"#
        ),
        (
            "ISO-2022-JP in single quotes, after a byte-order mark",
            Data([0xEF, 0xBB, 0xBF]) + Data("<?xml version='1.0' encoding = 'ISO-2022-JP' ?><r><v>x</v></r>".utf8),
            #"the encoding "ISO-2022-JP" is not accepted (UTF-8, UTF-16, UTF-32, US-ASCII or ISO-8859-1 only)"#
        ),
        (
            "UTF-7 declared in UTF-16 text", utf16LE(#"<?xml version="1.0" encoding="UTF-7"?><r><v>x</v></r>"#),
            #"the encoding "UTF-7" is not accepted (UTF-8, UTF-16, UTF-32, US-ASCII or ISO-8859-1 only)"#
        ),
        (
            "a long name, shown cut short", Data(#"<?xml version="1.0" encoding="\#(String(repeating: "X", count: 5000))"?><r/>"#.utf8),
            #"the encoding "\#(String(repeating: "X", count: 40))…" is not accepted (UTF-8, UTF-16, UTF-32, US-ASCII or ISO-8859-1 only)"#
        ),
        (
            "an encoding that cannot be read", Data(#"<?xml version="1.0" encoding=UTF-7?><r><v>x</v></r>"#.utf8),
            "the XML declaration's encoding cannot be read"
        ),
        (
            "EBCDIC, recognised from its first bytes", ebcdic(#"<?xml version="1.0" encoding="IBM037"?><r><v>x</v></r>"#),
            "EBCDIC text is not accepted"
        ),
        ("the EBCDIC signature alone", Data([0x4C, 0x6F, 0xA7, 0x94]) + Data("<r><v>x</v></r>".utf8), "EBCDIC text is not accepted"),
    ]

    @Test("a body in an encoding the DOCTYPE scan cannot read is malformed, so its source fails", arguments: refused.map(\.name))
    func refusedEncodings(name: String) {
        let (_, body, detail) = Self.refused.first { $0.name == name }!
        #expect(throws: ReformError(.malformed(format: .xml, detail: detail))) {
            try Self.reformer.reform(body, contract: Self.contract)
        }
    }

    /// `<r><v>café</v></r>` in ISO-8859-1, after `declaration`.
    static func latin1(_ declaration: String) -> Data {
        Data(declaration.utf8) + "<r><v>caf\u{E9}</v></r>".data(using: .isoLatin1)!
    }

    static let accepted: [(name: String, body: Data, value: String)] = [
        ("UTF-8", Data(#"<?xml version="1.0" encoding="UTF-8"?><r><v>caf\#u{E9}</v></r>"#.utf8), "caf\u{E9}"),
        ("ISO-8859-1", latin1(#"<?xml version="1.0" encoding="ISO-8859-1"?>"#), "caf\u{E9}"),
        ("Latin1, lower case", latin1("<?xml version='1.0' encoding='latin1'?>"), "caf\u{E9}"),
        ("US-ASCII", Data(#"<?xml version="1.0" encoding="US-ASCII" standalone="yes"?><r><v>x</v></r>"#.utf8), "x"),
        ("UTF-16 with its byte-order mark", utf16LE(#"<?xml version="1.0" encoding="UTF-16"?><r><v>caf\#u{E9}</v></r>"#), "caf\u{E9}"),
        ("no encoding named", Data(#"<?xml version="1.0"?><r><v>x</v></r>"#.utf8), "x"),
        ("no declaration", Data("<r><v>x</v></r>".utf8), "x"),
    ]

    @Test("UTF-8, UTF-16, US-ASCII and ISO-8859-1 bodies, and bodies naming no encoding, still parse", arguments: accepted.map(\.name))
    func acceptedEncodings(name: String) throws {
        let (_, body, value) = Self.accepted.first { $0.name == name }!
        #expect(try Self.reformer.reform(body, contract: Self.contract)["v"] == .string(value))
    }
}
