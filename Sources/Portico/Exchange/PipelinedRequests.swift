import NIOCore
import NIOHTTP1

/// What arrived for later requests while the current one was still being answered (HTTP/1.1
/// pipelining, RFC 9112 §9.3.2), in arrival order.
///
/// The gateway answers requests one at a time and in order, so a pipelined request's parts wait
/// here (``ExchangeStateMachine``). While anything waits, the connection holds back reads: the queue never holds
/// more than one read's worth, and the rest stays in the socket, where TCP's window slows the client
/// down. Doing this in the gateway's own handler, rather than in NIO's `HTTPServerPipelineHandler`,
/// saves a handler on every event and the two `epoll_ctl` calls per request that its holding back
/// of every read during a response costs.
struct PipelinedRequests {
    enum Event {
        case part(HTTPServerRequestPart)
        /// The decoder refused what followed the parts before it.
        case parserError(HTTPParserError)
    }

    /// Made at the first pipelined part: most clients never pipeline, and an empty queue made up
    /// front would cost every connection its storage for as long as it lives.
    private var events: CircularBuffer<Event>?

    var isEmpty: Bool { events?.isEmpty ?? true }
    var first: Event? { events?.first }

    mutating func append(_ event: Event) {
        if events == nil { events = CircularBuffer(initialCapacity: 4) }
        events?.append(event)
    }

    mutating func removeFirst() {
        _ = events?.removeFirst()
    }

    /// Forgets everything waiting (the connection is closing, or shutting down between requests).
    mutating func removeAll() {
        events = nil
    }
}
