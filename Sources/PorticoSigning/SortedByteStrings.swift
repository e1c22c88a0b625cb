#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A few byte strings, sorted, that other bytes are looked up among without making a string or
/// hashing anything: what the signature base does per query parameter and per dictionary member
/// (a signature covers a few dozen names at most; a query or a field can hold hundreds).
///
/// A lookup is a binary search: whatever bytes an attacker sends, each costs at most
/// log₂(count) + 1 comparisons of a few bytes. The strings are kept in one buffer, so a
/// comparison touches no reference count.
struct SortedByteStrings {
    private let bytes: [UInt8]
    /// Where each string starts in `bytes`, in sorted order; one more offset ends the last.
    private let offsets: [Int]
    /// The longest string's length.
    let longest: Int

    init(_ strings: some Sequence<String>) {
        let sorted = strings.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        var bytes: [UInt8] = []
        var offsets: [Int] = [0]
        for string in sorted {
            bytes += string
            offsets.append(bytes.count)
        }
        self.bytes = bytes
        self.offsets = offsets
        longest = sorted.reduce(0) { max($0, $1.count) }
    }

    var count: Int { offsets.count - 1 }
    var isEmpty: Bool { count == 0 }

    /// The string at `position`.
    subscript(position: Int) -> String {
        String(decoding: bytes[offsets[position]..<offsets[position + 1]], as: UTF8.self)
    }

    /// Where `key` is among the strings, if it is one of them.
    func position(of key: UnsafeBufferPointer<UInt8>) -> Int? {
        guard key.count <= longest else { return nil }
        return bytes.withUnsafeBufferPointer { all in
            offsets.withUnsafeBufferPointer { offsets in
                var low = 0
                var high = offsets.count - 1
                while low < high {
                    let middle = (low + high) / 2
                    let start = offsets[middle]
                    let length = offsets[middle + 1] - start
                    let common = min(length, key.count)
                    var order = common == 0 ? 0 : memcmp(all.baseAddress! + start, key.baseAddress!, common)
                    if order == 0 { order = Int32(length - key.count) }
                    if order == 0 { return middle }
                    if order < 0 { low = middle + 1 } else { high = middle }
                }
                return nil
            }
        }
    }
}
