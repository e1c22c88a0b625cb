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

    private var events = CircularBuffer<Event>()

    var isEmpty: Bool { events.isEmpty }
    var first: Event? { events.first }

    mutating func append(_ event: Event) {
        events.append(event)
    }

    mutating func removeFirst() {
        _ = events.removeFirst()
    }

    /// Forgets everything waiting (the connection is closing, or shutting down between requests).
    mutating func removeAll() {
        events.removeAll()
    }
}
