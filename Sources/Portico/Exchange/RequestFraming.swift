import NIOHTTP1
import PorticoHTTP

/// How a request is framed and how much of it has arrived: what the ``ExchangeStateMachine``
/// reads and keeps of an exchange, taken from the head and the policy's body limit when the head
/// arrives.
struct RequestFraming {
    /// The most of an unread body the gateway reads and throws away after answering early, so that
    /// the connection can carry the next request. A longer body (or one whose client waits for
    /// `100 Continue`) is not read at all: the answer says `Connection: close` and the connection
    /// closes, which costs the client a new connection rather than the gateway an unbounded read.
    static let maxDrainBytes = 64 * 1024

    /// Whether the connection stays open after this exchange.
    var keepAlive: Bool
    /// The request is HTTP/1.0, whose client can only see the end of a body of unknown length as
    /// the connection's close.
    let isHTTP10: Bool
    /// The body length the head announced (`nil`: none announced, or chunked).
    let declaredLength: Int?
    /// Whether a body follows the head (announced length over zero, or chunked).
    let expectsBody: Bool
    /// The policy's `maxBodyBytes` when the head arrived.
    let maxBodyBytes: Int
    /// The request asks to switch protocols (``asksForUpgrade(_:)``): the connection closes after
    /// its answer, unless the answer is a WebSocket `101` that turns it into a stream.
    let switchesProtocols: Bool
    /// The `Expect` field of an HTTP/1.1 request (RFC 9110 §10.1.1: an HTTP/1.0 client's is ignored).
    let expectation: String?
    /// An HTTP/1.1 client sent `Expect: 100-continue` and has not been told to go on: it may
    /// never send its body, so a request answered early cannot be drained.
    var awaitingContinue: Bool
    /// The request's `.end` has arrived.
    var requestEnded = false
    /// Body bytes read and dropped after an early answer.
    var drainedBytes = 0

    init(head: HTTPRequestHead, maxBodyBytes: Int) {
        let declaredLength = head.headers.first(name: "content-length").flatMap(Int.init)
        self.declaredLength = declaredLength
        let transferCoded = head.headers.contains(name: "transfer-encoding")
        self.expectsBody = (declaredLength ?? 0) > 0 || transferCoded
        self.isHTTP10 = head.version == .http1_0
        // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding is treated as faultily framed,
        // and the connection closes after the response (a 1.0 peer may frame what follows otherwise).
        self.switchesProtocols = Self.asksForUpgrade(head)
        self.keepAlive = head.isKeepAlive && !(transferCoded && isHTTP10) && !switchesProtocols
        self.maxBodyBytes = maxBodyBytes
        self.expectation = head.version == .http1_1 ? head.headers.first(name: "expect") : nil
        self.awaitingContinue = expectation.map { HeaderName.matches($0, "100-continue") } ?? false
    }

    /// A request that asks to switch protocols (`Connection: upgrade` with `Upgrade`, such as the
    /// `h2c` offer `java.net.http` adds to its first plain-HTTP request by default) or a `CONNECT`.
    /// The gateway answers it in HTTP/1.1, ignoring the offer (RFC 9110 §7.8), but the request
    /// decoder (``HTTP1RequestDecoder``, as llhttp) reads nothing after such a message, since what
    /// follows a switch is not HTTP; the next request on the connection would never be read and the
    /// client would wait for ever. So the answer says `Connection: close`, and the client's next
    /// request opens a new connection.
    static func asksForUpgrade(_ head: HTTPRequestHead) -> Bool {
        if head.method == .CONNECT { return true }
        guard head.headers.contains(name: "upgrade") else { return false }
        return head.headers["connection"].contains { HTTP1Syntax.list($0, contains: "upgrade") }
    }

    /// Whether what is left of the body can be read and dropped after an early answer, so that the
    /// connection can carry the next request: it is small (``maxDrainBytes``) and the client is not
    /// waiting for `100 Continue` before sending it.
    var bodyIsDrainable: Bool {
        !expectsBody || requestEnded || (!awaitingContinue && (declaredLength ?? 0) <= Self.maxDrainBytes)
    }
}
