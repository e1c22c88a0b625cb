import NIOCore
import NIOHTTP1
import PorticoHTTP

/// An upstream request's header fields, kept as the HTTP/1.1 field lines they are sent as, and a
/// backend's response fields, kept as the lines they reach an HTTP/1.1 client as: `name: value`
/// and CR LF for each, in the order added, a name repeated if the caller repeats it.
///
/// Bytes rather than `HTTPHeaders`, NIO's array of string pairs, because the proxy passes most of
/// a client's fields on. As pairs, each field cost a reference count each way when it was added,
/// again when the request was copied for an attempt, and again when the NIO client wrote the
/// head from it. As lines, adding a field copies its bytes, copying the request copies one
/// reference, and the NIO client writes the head with one copy of the lines
/// (``UpstreamRequest/http1Head(for:)``). The clients that need names and values again (libcurl's
/// header list, HTTP/2's header block, an upgrade's head) read them back from the lines. A
/// response's are read by the NIO client's decoder straight into lines, and the gateway copies
/// the lines it passes on to the client as they are (``forEachField(_:)``).
///
/// Each field is checked as it is added (``WireSyntax``): one whose name is not a token, or whose
/// value holds a control byte (a CR LF that would start a second request among them), is not
/// written, and the lines become unsendable (``isSendable``). Every client refuses such a request
/// (the NIO one before it connects) rather than send it without the field.
public struct FieldLines: Sendable {
    /// The lines, each ending in CR LF, and nothing else. An array, not a `ByteBuffer`: one
    /// allocation where a buffer takes two (its storage object and its bytes).
    public private(set) var bytes: [UInt8]
    /// How many fields the lines hold.
    public private(set) var count = 0
    /// False while a field HTTP/1.1 cannot carry was added (and left out), and not removed since.
    public var isSendable: Bool { leftOut == nil }
    /// The names of the fields left out, nil when none was. A field that is removed afterwards (a
    /// client's validators before a cache fill, say) no longer makes the request unsendable, as it
    /// would not have been sent anyway. (Kept at a price: copying and destroying the lines calls
    /// the runtime on this reference even when it is nil, about ten calls a proxied request.)
    private var leftOut: [String]?
    /// Whether a `Host` field is among them.
    public private(set) var hasHost = false
    /// Whether a `Connection` field lists `close`.
    public private(set) var listsClose = false
    /// Whether a `Content-Length` or `Transfer-Encoding` field is among them. The NIO and HTTP/2
    /// clients and an upgrade leave these out, since a request's framing is theirs to write from
    /// its body; libcurl is given them as they are (the proxy never passes a client's on).
    public private(set) var hasFraming = false

    /// - Parameter capacity: bytes to reserve, so that the lines are written without growing.
    public init(capacity: Int = 0) {
        bytes = []
        if capacity > 0 { bytes.reserveCapacity(capacity) }
    }

    /// The fields of `headers`, in their order.
    public init(_ headers: HTTPHeaders) {
        self.init(capacity: headers.count * 48)
        for (name, value) in headers { add(name: name, value: value) }
    }

    /// The fields of `headers`, in their order, and the names `earlier` left out: fields read
    /// as pairs from `earlier` (which hold none of those) and written back keep it unsendable.
    init(_ headers: HTTPHeaders, leavingOut earlier: FieldLines) {
        self.init(headers)
        if let names = earlier.leftOut { leftOut = (leftOut ?? []) + names }
    }

    /// The fields `pairs` lists, in its order.
    public init(_ pairs: [(name: String, value: String)]) {
        self.init(capacity: pairs.count * 48)
        for (name, value) in pairs { add(name: name, value: value) }
    }

    public var isEmpty: Bool { count == 0 }

    /// Appends a field, or, if HTTP/1.1 cannot carry it as it is, marks the lines unsendable.
    public mutating func add(name: String, value: String) {
        guard WireSyntax.isField(name: name, value: value) else {
            leftOut = (leftOut ?? []) + [name]
            return
        }
        // Read in place (a native string's bytes are contiguous; `withUTF8` copies any other).
        var name = name
        var value = value
        name.withUTF8 { name in
            value.withUTF8 { value in appendChecked(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value)) }
        }
    }

    /// Appends a field already checked as ``add(name:value:)`` checks one (a token for a name, no
    /// control byte in the value), from its bytes, and sets the flags it calls for: what `add`
    /// does once it has checked, and what the NIO client's decoder does with each line of a
    /// response, which it checked as it read it, without making strings of them. Lines made from
    /// a response thus say what they hold wherever they go.
    ///
    /// - Parameter inLine: whether `name` and `value` are slices of one field line as received
    ///   (the decoder's), so that the bytes between them may be read: when they are `: `, the line
    ///   is copied in one piece.
    mutating func appendChecked(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, inLine: Bool = false) {
        switch name.count {
        case 4 where HeaderName.matches(bytes: name, "host"):
            hasHost = true
        case 10 where HeaderName.matches(bytes: name, "connection"):
            HTTP1Syntax.forEachElement(of: value) { if HeaderName.matches(bytes: $0, "close") { listsClose = true } }
        case 14 where HeaderName.matches(bytes: name, "content-length"), 17 where HeaderName.matches(bytes: name, "transfer-encoding"):
            hasFraming = true
        default:
            break
        }
        if inLine, let start = name.baseAddress, value.baseAddress == start + name.count + 2,
            start.load(fromByteOffset: name.count + 1, as: UInt8.self) == UInt8(ascii: " ")
        {
            // Written as lines are kept (`name: value`, as nearly every server writes them): the
            // line is copied in one piece.
            bytes.append(contentsOf: UnsafeRawBufferPointer(start: start, count: name.count + 2 + value.count).typed)
        } else {
            bytes.append(contentsOf: name.typed)
            bytes.append(UInt8(ascii: ":"))
            bytes.append(UInt8(ascii: " "))
            bytes.append(contentsOf: value.typed)
        }
        bytes.append(UInt8(ascii: "\r"))
        bytes.append(UInt8(ascii: "\n"))
        count += 1
    }

    /// Whether `name` is a framing field (`Content-Length`, `Transfer-Encoding`), which the
    /// clients write themselves (``hasFraming``).
    static func isFraming(_ name: String) -> Bool {
        HeaderName.matches(name, "content-length") || HeaderName.matches(name, "transfer-encoding")
    }

    /// The first value of the field `name` (any case).
    public func first(name: String) -> String? {
        let lowercase = name.lowercased()
        var found: String?
        forEachLine { fieldName, value in
            guard HeaderName.matches(bytes: fieldName, lowercase) else { return true }
            found = String(decoding: value, as: UTF8.self)
            return false
        }
        return found
    }

    /// Whether a field `name` (any case) is among them.
    public func contains(name: String) -> Bool {
        let lowercase = name.lowercased()
        var found = false
        forEachLine { fieldName, _ in
            found = HeaderName.matches(bytes: fieldName, lowercase)
            return !found
        }
        return found
    }

    /// Removes every field `name` (any case). The lines are written again only if one is there.
    public mutating func remove(name: String) {
        let lowercase = name.lowercased()
        guard contains(name: lowercase) || leftOut?.contains(where: { HeaderName.matches($0, lowercase) }) == true else { return }
        removeAll { HeaderName.matches($0, lowercase) }
    }

    /// Removes every field `name` (any case), then adds it with `value`, last.
    public mutating func replaceOrAdd(name: String, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    /// Removes the fields whose names `shouldRemove` picks, keeping the others in their order.
    /// Rare (a field a `Connection` lists, a retry's `Host`): the lines are written anew.
    public mutating func removeAll(where shouldRemove: (_ name: String) -> Bool) {
        var kept = FieldLines(capacity: bytes.count)
        for (name, value) in self where !shouldRemove(name) { kept.add(name: name, value: value) }
        let stillLeftOut = leftOut?.filter { !shouldRemove($0) } ?? []
        kept.leftOut = stillLeftOut.isEmpty ? nil : stillLeftOut
        self = kept
    }

    /// The fields as NIO's type, for the paths that hand a head to NIO's codecs.
    public var httpHeaders: HTTPHeaders {
        var headers = HTTPHeaders()
        headers.reserveCapacity(count)
        for (name, value) in self { headers.add(name: name, value: value) }
        return headers
    }

    /// Calls `body` with each field's name, its value and its whole line (through its CR LF),
    /// read in place, until it returns false: for a caller that copies the lines it keeps as
    /// they are.
    public func forEachField(
        _ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ line: UnsafeRawBufferPointer) -> Bool
    ) {
        bytes.withUnsafeBytes { raw in
            var start = 0
            while start < raw.count {
                let line = Self.line(in: raw, from: start)
                let whole = UnsafeRawBufferPointer(rebasing: raw[start..<line.next])
                guard body(UnsafeRawBufferPointer(rebasing: raw[line.name]), UnsafeRawBufferPointer(rebasing: raw[line.value]), whole)
                else { return }
                start = line.next
            }
        }
    }

    /// Calls `body` with each field's name and value, read in place, until it returns false.
    func forEachLine(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Bool) {
        bytes.withUnsafeBytes { raw in
            var start = 0
            while start < raw.count {
                let line = Self.line(in: raw, from: start)
                guard body(UnsafeRawBufferPointer(rebasing: raw[line.name]), UnsafeRawBufferPointer(rebasing: raw[line.value])) else {
                    return
                }
                start = line.next
            }
        }
    }

    /// The line at `start`: its name runs to the first colon (a token holds none), its value from
    /// after the colon and space to the CR (a value holds none), as ``add(name:value:)`` wrote them.
    fileprivate static func line(in raw: UnsafeRawBufferPointer, from start: Int) -> (name: Range<Int>, value: Range<Int>, next: Int) {
        var colon = start
        while raw[colon] != UInt8(ascii: ":") { colon += 1 }
        var end = colon + 2
        while raw[end] != UInt8(ascii: "\r") { end += 1 }
        return (start..<colon, (colon + 2)..<end, end + 2)
    }
}

extension FieldLines: Sequence {
    /// The fields as strings, in order: made from the lines as they are read.
    public struct Iterator: IteratorProtocol {
        private let bytes: [UInt8]
        private var offset = 0

        fileprivate init(_ bytes: [UInt8]) { self.bytes = bytes }

        public mutating func next() -> (name: String, value: String)? {
            guard offset < bytes.count else { return nil }
            let start = offset
            let (field, next) = bytes.withUnsafeBytes { raw in
                let line = FieldLines.line(in: raw, from: start)
                let name = String(decoding: UnsafeRawBufferPointer(rebasing: raw[line.name]), as: UTF8.self)
                let value = String(decoding: UnsafeRawBufferPointer(rebasing: raw[line.value]), as: UTF8.self)
                return ((name: name, value: value), line.next)
            }
            offset = next
            return field
        }
    }

    public func makeIterator() -> Iterator { Iterator(bytes) }

    public var underestimatedCount: Int { count }
}

extension UnsafeRawBufferPointer {
    /// The bytes as `UInt8`s: what an array appends with one copy (a raw buffer's bytes were
    /// appended one at a time).
    fileprivate var typed: UnsafeBufferPointer<UInt8> { assumingMemoryBound(to: UInt8.self) }
}
