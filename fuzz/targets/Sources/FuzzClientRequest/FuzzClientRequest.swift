import NIOCore
import NIOEmbedded
import NIOHTTP1
import PorticoHTTP

@testable import Portico

/// libFuzzer's entry point: the bytes a client sends on one connection, read by the gateway's own
/// HTTP/1.1 request decoder (`HTTP1RequestDecoder`). The first byte says where to cut the rest in
/// two; the limits are small (512 bytes of head, 8 fields) so that they are reached.
///
/// Checks: nothing crashes; what is read (heads, body bytes, ends, or the refusal) does not depend
/// on where the network cut the bytes (whole, cut in two, byte by byte); every field read is a token
/// and a value without a control byte or surrounding whitespace; every target has no space or
/// control byte; and, part by part, what NIO's decoder (llhttp) reads from the same bytes is what
/// Portico reads, up to the first part either refuses. The two differ only in what one refuses and
/// the other takes (an extension method, two spaces in a request line, trailing whitespace kept in a
/// value), never in where a request or its body ends.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClientRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard let control = input.first else { return 0 }
    let bytes = Array(input.dropFirst())

    let whole = read([bytes[...]])
    let cut = Int(control) % (bytes.count + 1)
    let halves = read([bytes[..<cut], bytes[cut...]])
    let singles = read(bytes.indices.map { bytes[$0...$0] })
    check(whole == halves, "the reading depends on the cut: \(whole) against \(halves)")
    check(whole == singles, "the reading depends on the cut: \(whole) against \(singles) byte by byte")

    let nio = nioReading(bytes)
    for (ours, theirs) in zip(whole, nio) {
        if ours == .refused || theirs == .refused { break }
        check(ours == theirs, "NIO read \(theirs) where Portico read \(ours)\n NIO: \(nio)\n Portico: \(whole)")
    }
    // Where neither refused, both read the same parts: neither waits where the other went on.
    if !whole.contains(.refused), !nio.contains(.refused) {
        check(whole == nio, "NIO read \(nio), Portico \(whole)")
    }
    return 0
}

enum Event: Equatable, CustomStringConvertible {
    case head(String)
    case body([UInt8])
    case end([String]?)
    case refused

    var description: String {
        switch self {
        case .head(let head): "head(\(head.debugDescription))"
        case .body(let bytes): "body(\(bytes.count) bytes)"
        case .end(let trailers): "end(\(trailers?.description ?? "nil"))"
        case .refused: "refused"
        }
    }
}

let maxHeadBytes = 512
let maxFieldCount = 8

private func append(_ part: HTTPServerRequestPart, to events: inout [Event], checking: Bool) {
    switch part {
    case .head(let head):
        if checking {
            check(head.uri.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F }, "a target with a space or a control byte")
            for (name, value) in head.headers {
                check(HeaderName.isToken(name) && WireSyntax.isFieldValue(value), "a field read is not sendable: \(name): \(value)")
                check(value == trimmed(value), "a value read with whitespace around it")
            }
        }
        let fields = head.headers.map { "\($0.name): \(trimmed($0.value))" }.joined(separator: "\n")
        events.append(.head("\(head.method.wireName) \(head.uri) \(head.version)\n\(fields)"))
    case .body(let bytes):
        if checking { check(bytes.readableBytes > 0, "an empty body part") }
        if case .body(let earlier) = events.last {
            events[events.count - 1] = .body(earlier + bytes.readableBytesView)
        } else {
            events.append(.body(Array(bytes.readableBytesView)))
        }
    case .end(let trailers):
        events.append(.end(trailers.map { $0.map { "\($0.name): \(trimmed($0.value))" } }))
    }
}

private func read(_ pieces: [ArraySlice<UInt8>]) -> [Event] {
    var decoder = HTTP1RequestDecoder(maxHeadBytes: maxHeadBytes, maxFieldCount: maxFieldCount)
    var events: [Event] = []
    for piece in pieces {
        decoder.receive(ByteBuffer(bytes: piece))
        do {
            while let part = try decoder.next() { append(part, to: &events, checking: true) }
        } catch {
            events.append(.refused)
            return events
        }
    }
    return events
}

/// NIO's reading, with its limits set to the same numbers.
private func nioReading(_ bytes: [UInt8]) -> [Event] {
    var limits = NIOHTTPDecoderLimitConfiguration()
    limits.maxHeaderListSize = maxHeadBytes
    limits.maxHeaderFieldSize = maxHeadBytes
    limits.maxHeaderFieldCount = maxFieldCount
    let channel = EmbeddedChannel(
        handler: ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, limitConfiguration: limits)))
    defer { _ = try? channel.finish() }
    var events: [Event] = []
    var refused = false
    do {
        try channel.writeInbound(ByteBuffer(bytes: bytes))
    } catch {
        refused = true
    }
    while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) { append(part, to: &events, checking: false) }
    if refused { events.append(.refused) }
    return events
}

private func trimmed(_ value: String) -> String {
    String(Substring(value).trimmingOptionalWhitespace())
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzClientRequest: \(message())") }
}
