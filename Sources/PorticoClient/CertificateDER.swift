import Foundation

/// Just enough DER (X.690) to find a certificate's `SubjectPublicKeyInfo`, the bytes public-key
/// pins hash. The client carries no X.509 library; this walks the five fields before it in
/// `TBSCertificate` (RFC 5280, 4.1) and checks every length against the bytes it has.
enum CertificateDER {
    /// The `SubjectPublicKeyInfo` of a DER certificate, tag and length included; `nil` when the
    /// bytes are not a certificate.
    static func subjectPublicKeyInfo(ofCertificate der: Data) -> Data? {
        let bytes = [UInt8](der)
        var outer = Reader(bytes: bytes[...])
        guard let certificate = outer.read(tag: 0x30), outer.isAtEnd else { return nil }
        var fields = Reader(bytes: certificate.contents)
        guard let tbs = fields.read(tag: 0x30) else { return nil }
        var tbsFields = Reader(bytes: tbs.contents)
        if tbsFields.nextTag == 0xA0 { guard tbsFields.read(tag: 0xA0) != nil else { return nil } }  // [0] version
        // serialNumber, signature, issuer, validity, subject.
        for tag: UInt8 in [0x02, 0x30, 0x30, 0x30, 0x30] {
            guard tbsFields.read(tag: tag) != nil else { return nil }
        }
        guard let key = tbsFields.read(tag: 0x30) else { return nil }
        return Data(key.whole)
    }

    struct Element {
        /// Tag, length and contents.
        var whole: ArraySlice<UInt8>
        var contents: ArraySlice<UInt8>
    }

    struct Reader {
        var bytes: ArraySlice<UInt8>

        var isAtEnd: Bool { bytes.isEmpty }
        var nextTag: UInt8? { bytes.first }

        /// The next element if its (single-byte) tag is `tag` and its definite length fits.
        mutating func read(tag: UInt8) -> Element? {
            var cursor = bytes.startIndex
            guard cursor < bytes.endIndex, bytes[cursor] == tag else { return nil }
            cursor += 1
            guard cursor < bytes.endIndex else { return nil }
            let first = bytes[cursor]
            cursor += 1
            var length = 0
            if first < 0x80 {
                length = Int(first)
            } else {
                // Long form: 1 to 4 length bytes (no certificate is 4 GiB); 0x80 (indefinite) is BER only.
                let count = Int(first & 0x7F)
                guard (1...4).contains(count), bytes.endIndex - cursor >= count else { return nil }
                for _ in 0..<count {
                    length = length << 8 | Int(bytes[cursor])
                    cursor += 1
                }
            }
            guard bytes.endIndex - cursor >= length else { return nil }
            let element = Element(whole: bytes[bytes.startIndex..<cursor + length], contents: bytes[cursor..<cursor + length])
            bytes = bytes[(cursor + length)...]
            return element
        }
    }
}
