extension Substring {
    /// The text at UTF-8 offsets `range` (counted from this substring's start, as `withUTF8`
    /// counts them), sharing its storage. The offsets must fall on character boundaries: they
    /// follow ASCII delimiters where they are used.
    public func utf8Slice(_ range: Range<Int>) -> Substring {
        let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        return Substring(utf8[start..<utf8.index(start, offsetBy: range.count)])
    }
}

extension String {
    /// The text at UTF-8 offsets `range`, sharing this string's storage.
    public func utf8Slice(_ range: Range<Int>) -> Substring {
        self[...].utf8Slice(range)
    }
}
