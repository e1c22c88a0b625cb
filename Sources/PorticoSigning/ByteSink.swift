/// Where bytes of a signature base (or of a structured field) are written: the growable array of
/// ``SignatureBase/write(for:request:to:)``, or the fixed buffer ``SignatureView`` builds its base
/// in. The derived components' values are written by one piece of code into either.
protocol ByteSink {
    mutating func appendByte(_ byte: UInt8)
    mutating func appendBytes(_ bytes: UnsafeBufferPointer<UInt8>)
}

extension [UInt8]: ByteSink {
    mutating func appendByte(_ byte: UInt8) { append(byte) }
    mutating func appendBytes(_ bytes: UnsafeBufferPointer<UInt8>) { append(contentsOf: bytes) }
}

extension ByteSink {
    /// Appends `text`'s UTF-8 bytes in one copy. (`append(contentsOf: text.utf8)` goes element by
    /// element through the generic sequence path, which a profile of the signature base put at
    /// several per cent of a verification.)
    mutating func appendUTF8(_ text: String) {
        var text = text
        text.withUTF8 { appendBytes($0) }
    }

    /// Appends a literal's bytes in one copy.
    mutating func appendLiteral(_ literal: StaticString) {
        appendBytes(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends `text`'s UTF-8 bytes in one copy.
    mutating func appendUTF8(_ text: Substring) {
        var text = text
        text.withUTF8 { appendBytes($0) }
    }

    /// Appends the bytes `range` (UTF-8 offsets) of `text` in one copy.
    mutating func appendUTF8(_ text: String, offsets range: Range<Int>) {
        var text = text
        text.withUTF8 { appendBytes(UnsafeBufferPointer(rebasing: $0[range])) }
    }
}
