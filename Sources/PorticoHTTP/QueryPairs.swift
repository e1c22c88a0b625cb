/// The `name=value` pairs of a query (`application/x-www-form-urlencoded`'s split, WHATWG URL
/// §5.1), found over its bytes.
///
/// Splitting the query as a string walks it by characters (grapheme breaking), which cost about a
/// microsecond per parameter: a client's query of hundreds of parameters must cost no more than
/// its bytes. The gateway's route, its facades and the signature base's `@query-param` all split
/// queries this way.
public enum QueryPairs {
    /// Calls `body` with the byte ranges of each pair of `query` (its bytes after `?`): the name,
    /// and the value (nil without `=`). Empty pairs (`&&`) are skipped. `&` and `=` are ASCII, so
    /// every range starts and ends on a character boundary.
    public static func forEach(in query: UnsafeBufferPointer<UInt8>, _ body: (Range<Int>, Range<Int>?) -> Void) {
        var start = 0
        while start < query.count {
            let end = query[start...].firstIndex(of: UInt8(ascii: "&")) ?? query.count
            if start < end {
                if let equals = query[start..<end].firstIndex(of: UInt8(ascii: "=")) {
                    body(start..<equals, (equals + 1)..<end)
                } else {
                    body(start..<end, nil)
                }
            }
            start = end + 1
        }
    }
}
