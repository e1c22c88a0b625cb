extension String {
    /// The text at UTF-8 offsets `range`, sharing this string's storage.
    func utf8Slice(_ range: Range<Int>) -> Substring {
        let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        return Substring(utf8[start..<utf8.index(start, offsetBy: range.count)])
    }
}
