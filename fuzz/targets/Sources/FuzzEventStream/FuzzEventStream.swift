@testable import PorticoClient

/// libFuzzer's entry point: the bytes as a `text/event-stream` body, read by the client library's
/// parser. Nothing crashes; the events do not depend on where the network cut the bytes (whole,
/// cut at a point the input picks, byte by byte); no event's data holds a CR, and its LFs are the
/// ones joining `data:` lines; a last event ID holds no NUL, CR or LF; an input shorter than the
/// limit is never refused, and a refusal happens at every cut or at none.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEventStream(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let limit = 512
    func read(_ pieces: [ArraySlice<UInt8>]) -> (events: [ServerSentEvent], retry: Duration?, refused: Bool) {
        var parser = EventStreamParser(maximumEventBytes: limit)
        var events: [ServerSentEvent] = []
        for piece in pieces {
            do {
                events += try parser.feed(piece)
            } catch {
                return (events, parser.retry, true)
            }
        }
        return (events, parser.retry, false)
    }
    let whole = read([bytes[...]])
    let cut = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
    let halves = read([bytes[..<cut], bytes[cut...]])
    let singles = read(bytes.indices.map { bytes[$0...$0] })
    check(whole.refused == halves.refused && whole.refused == singles.refused, "a refusal depends on the cut")
    check(!whole.refused || bytes.count >= limit, "an input shorter than the limit was refused")
    // A refused stream's events are those before the refusal, which a whole feed does not return.
    guard !whole.refused else { return 0 }
    check(whole.events == halves.events && whole.events == singles.events, "the events depend on the cut")
    check(whole.retry == halves.retry && whole.retry == singles.retry, "the retry time depends on the cut")
    for event in whole.events {
        check(!event.data.utf8.contains(UInt8(ascii: "\r")), "an event's data holds a CR")
        check(!event.lastEventID.utf8.contains { $0 == 0 || $0 == 0x0A || $0 == 0x0D }, "a last event ID holds NUL, CR or LF")
        check(!event.type.isEmpty && !event.type.utf8.contains { $0 == 0x0A || $0 == 0x0D }, "an event type is empty or holds a line end")
        // Counted in scalars: an invalid byte decodes to U+FFFD, three bytes for one.
        check(event.data.unicodeScalars.count < limit, "an event's data is over the limit")
    }
    return 0
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzEventStream: \(message())") }
}
