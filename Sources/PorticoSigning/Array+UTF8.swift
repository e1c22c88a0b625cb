extension [UInt8] {
    /// Appends `text`'s UTF-8 bytes in one copy. (`append(contentsOf: text.utf8)` goes element by
    /// element through the generic sequence path, which a profile of the signature base put at
    /// several per cent of a verification.)
    mutating func appendUTF8(_ text: String) {
        var text = text
        text.withUTF8 { append(contentsOf: $0) }
    }

    /// Appends `text`'s UTF-8 bytes in one copy.
    mutating func appendUTF8(_ text: Substring) {
        var text = text
        text.withUTF8 { append(contentsOf: $0) }
    }

    /// Appends the bytes `range` (UTF-8 offsets) of `text` in one copy.
    mutating func appendUTF8(_ text: String, offsets range: Range<Int>) {
        var text = text
        text.withUTF8 { append(contentsOf: UnsafeBufferPointer(rebasing: $0[range])) }
    }
}
