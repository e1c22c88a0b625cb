import Foundation

/// One event of a server-sent event stream (`text/event-stream`), as the HTML standard's event
/// stream interpretation dispatches it: at the blank line that ends it, when it has data.
public struct ServerSentEvent: Sendable, Hashable {
    /// The `event:` field; `message` when the event named none (as an `EventSource` reports it).
    public var type: String
    /// The `data:` lines, joined with line feeds.
    public var data: String
    /// The stream's last event ID as of this event: this event's `id:`, or the latest one before
    /// it (empty when there was none). A reconnection sends it as `Last-Event-ID`.
    public var lastEventID: String

    public init(type: String = "message", data: String, lastEventID: String = "") {
        self.type = type
        self.data = data
        self.lastEventID = lastEventID
    }

    /// ``data`` decoded from JSON, as most streams send it.
    public func decode<Value: Decodable>(_ type: Value.Type = Value.self, decoder: JSONDecoder = JSONDecoder()) throws -> Value {
        try decoder.decode(type, from: Data(data.utf8))
    }
}

/// Why an event stream could not be read, under ``PorticoAPIError/decoding``.
public struct EventStreamError: Error, CustomStringConvertible, Equatable {
    private enum Reason: Equatable {
        case notEventStream, eventTooLarge
    }

    private let reason: Reason
    public let description: String

    /// A 2xx answer whose `Content-Type` is not `text/event-stream`.
    public static let notEventStream = EventStreamError(reason: .notEventStream, description: "not an event stream")
    /// An event (or a line) longer than ``PorticoAPI/EventStreamOptions/maximumEventBytes``.
    public static let eventTooLarge = EventStreamError(reason: .eventTooLarge, description: "an event too large")

    static func notEventStream(contentType: String?) -> EventStreamError {
        EventStreamError(
            reason: .notEventStream, description: "the answer is \(contentType ?? "without a Content-Type"), not text/event-stream")
    }

    static func eventTooLarge(limit: Int) -> EventStreamError {
        EventStreamError(reason: .eventTooLarge, description: "an event or line longer than \(limit) bytes")
    }

    /// Same reason, whatever the words.
    public static func == (lhs: EventStreamError, rhs: EventStreamError) -> Bool { lhs.reason == rhs.reason }
}
