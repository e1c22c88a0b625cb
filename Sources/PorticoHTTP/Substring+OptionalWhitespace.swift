extension Substring {
    /// Without the optional whitespace (`OWS`: spaces and horizontal tabs, RFC 9110 §5.6.3) that
    /// may surround an element of a field value's comma-separated list.
    ///
    /// Read as bytes, as RFC 9110 defines OWS: the `Character` view would run grapheme breaking
    /// on every field value the proxy splits (a space before a combining mark is still a space).
    public func trimmingOptionalWhitespace() -> Substring {
        let bytes = utf8
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, Self.isOptionalWhitespace(bytes[start]) { bytes.formIndex(after: &start) }
        while start < end {
            let last = bytes.index(before: end)
            guard Self.isOptionalWhitespace(bytes[last]) else { break }
            end = last
        }
        return Substring(bytes[start..<end])
    }

    @inline(__always)
    private static func isOptionalWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
    }
}
