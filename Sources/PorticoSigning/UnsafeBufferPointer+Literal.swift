import Foundation

extension UnsafeBufferPointer<UInt8> {
    /// Whether these bytes are exactly `literal`'s: how the readers recognise the names they know
    /// (derived components, signature parameters) without making a string of the bytes first.
    func holds(_ literal: StaticString) -> Bool {
        guard count == literal.utf8CodeUnitCount else { return false }
        guard let start = baseAddress else { return true }
        return memcmp(literal.utf8Start, start, count) == 0
    }
}
