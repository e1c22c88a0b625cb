import Testing

@testable import PorticoClient

/// The event stream interpretation of the HTML standard (§9.2.6), case by case, with the standard's
/// own examples, and fed in every cut a network might make.
@Suite("Reading a text/event-stream")
struct EventStreamParserTests {
    static func events(_ text: String, lastEventID: String = "") throws -> [ServerSentEvent] {
        var parser = EventStreamParser(lastEventID: lastEventID)
        return try parser.feed(Array(text.utf8))
    }

    @Test("the standard's examples: data lines joined with LF, a trailing event without its blank line dropped")
    func standardExamples() throws {
        #expect(
            try Self.events("data: YHOO\ndata: +2\ndata: 10\n\n") == [ServerSentEvent(data: "YHOO\n+2\n10")])
        // "The following stream fires two events": the first has an id, the second keeps it.
        #expect(
            try Self.events(": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n")
                == [
                    ServerSentEvent(data: "first event", lastEventID: "1"),
                    ServerSentEvent(data: "second event", lastEventID: ""),
                ])
        // Two events: an empty data, then a data of one LF; the last line is incomplete.
        #expect(try Self.events("data\n\ndata\ndata\n\ndata:") == [ServerSentEvent(data: ""), ServerSentEvent(data: "\n")])
        // "data:test" and "data: test" are the same; only one space is dropped.
        #expect(try Self.events("data:test\n\ndata: test\n\ndata:  test\n\n").map(\.data) == ["test", "test", " test"])
    }

    @Test("CRLF, CR and LF end lines, mixed; event types, comments and unknown fields")
    func lineEndsAndFields() throws {
        let events = try Self.events(
            "\u{FEFF}event: price\r\ndata: {\"a\":1}\r\n\r\n:heartbeat\rdata: two\rfoo: bar\rnot a field\r\revent: x\n\n")
        #expect(events == [ServerSentEvent(type: "price", data: "{\"a\":1}"), ServerSentEvent(data: "two")])
        // An event type without data dispatches nothing, and does not leak into the next event.
        #expect(try Self.events("event: lost\n\ndata: kept\n\n") == [ServerSentEvent(data: "kept")])
    }

    @Test("id: kept across events, set to empty by a bare id, ignored when it holds NUL; a starting id is reported")
    func identifiers() throws {
        #expect(
            try Self.events("data: a\n\nid: 7\ndata: b\n\ndata: c\n\nid: x\u{0}y\ndata: d\n\nid:\ndata: e\n\n", lastEventID: "5").map(
                \.lastEventID)
                == ["5", "7", "7", "7", ""])
    }

    @Test("retry: digits only set the reconnection time; anything else is ignored")
    func retry() throws {
        var parser = EventStreamParser()
        _ = try parser.feed(Array("retry: 1500\n\n".utf8))
        #expect(parser.retry == .milliseconds(1500))
        _ = try parser.feed(Array("retry: 2s\nretry: -1\nretry:\nretry: 1 5\n\n".utf8))
        #expect(parser.retry == .milliseconds(1500))
        _ = try parser.feed(Array("retry:0\n".utf8))
        #expect(parser.retry == .zero)
    }

    @Test("every cut of a stream gives the same events: CRLF split between chunks is one line end")
    func everyCut() throws {
        let text = "\u{FEFF}id: 1\r\nevent: tick\r\ndata: é\r\ndata: ü\r\n\r\n: hb\r\rdata: two\n\nretry: 10\r\n"
        let bytes = Array(text.utf8)
        let whole = try Self.events(text)
        #expect(whole == [ServerSentEvent(type: "tick", data: "é\nü", lastEventID: "1"), ServerSentEvent(data: "two", lastEventID: "1")])
        for first in 0...bytes.count {
            for second in first...bytes.count {
                var parser = EventStreamParser()
                var events = try parser.feed(bytes[..<first])
                events += try parser.feed(bytes[first..<second])
                events += try parser.feed(bytes[second...])
                #expect(events == whole, "cut at \(first), \(second)")
                #expect(parser.retry == .milliseconds(10))
            }
        }
    }

    @Test("a restart drops the unfinished event and a half line end, and keeps the last id and retry")
    func restart() throws {
        var parser = EventStreamParser()
        _ = try parser.feed(Array("retry: 99\nid: 3\ndata: done\n\ndata: half".utf8))
        parser.restart()
        let events = try parser.feed(Array("data: fresh\n\n".utf8))
        #expect(events == [ServerSentEvent(data: "fresh", lastEventID: "3")])
        // An id whose event was cut off is not the one a reconnection resumes after.
        _ = try parser.feed(Array("id: 4\ndata: lost".utf8))
        #expect(parser.lastEventID == "3")
        parser.restart()
        #expect(parser.lastEventID == "3")
        // A blank line commits an id even without data to dispatch.
        _ = try parser.feed(Array("id: 5\n\n".utf8))
        #expect(parser.lastEventID == "5")
        #expect(parser.retry == .milliseconds(99))
        // A CR that ended the lost connection does not join the next one's first LF into one line
        // end, and the new stream's byte order mark is dropped too.
        var crossing = EventStreamParser()
        _ = try crossing.feed(Array("data: a\r".utf8))
        crossing.restart()
        #expect(try crossing.feed(Array("\u{FEFF}\ndata: b\n\n".utf8)) == [ServerSentEvent(data: "b")])
    }

    @Test("a line or an event longer than the limit is refused; one just under it is read")
    func limits() throws {
        var parser = EventStreamParser(maximumEventBytes: 64)
        #expect(try parser.feed(Array(("data: " + String(repeating: "x", count: 50) + "\n\n").utf8)).count == 1)
        var long = EventStreamParser(maximumEventBytes: 64)
        #expect(throws: EventStreamError.eventTooLarge) { try long.feed(Array(String(repeating: "y", count: 65).utf8)) }
        // Many short data lines add up to one event too large.
        var many = EventStreamParser(maximumEventBytes: 64)
        #expect(throws: EventStreamError.eventTooLarge) { try many.feed(Array(String(repeating: "data: abcdefgh\n", count: 10).utf8)) }
    }
}
