extension Substring {
    /// Without the optional whitespace (`OWS`: spaces and horizontal tabs, RFC 9110 §5.6.3) that
    /// may surround an element of a field value's comma-separated list.
    public func trimmingOptionalWhitespace() -> Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
