import NIOCore
import NIOHTTP1
import Testing

@testable import PorticoUpstream

@Suite("An upstream connection's state machine")
struct UpstreamConnectionStateMachineTests {
    typealias Machine = UpstreamConnectionStateMachine

    static func head(
        _ status: HTTPResponseStatus = .ok, version: HTTPVersion = .http1_1, _ fields: [(String, String)] = [("Content-Length", "3")]
    ) -> HTTPResponseHead {
        HTTPResponseHead(version: version, status: status, headers: HTTPHeaders(fields))
    }

    /// A machine with one exchange under way and its request written.
    static func started(high: Int = 256 * 1024, low: Int = 64 * 1024, head: Bool = false, keepAlive: Bool = true) -> Machine {
        var machine = Machine(highWatermark: high, lowWatermark: low)
        _ = machine.startExchange(isHeadRequest: head, keepAlive: keepAlive)
        _ = machine.requestWritten()
        return machine
    }

    /// Runs one complete exchange and returns whether the connection was kept.
    static func reuse(
        after head: HTTPResponseHead, headRequest: Bool = false, keepAlive: Bool = true, body: String? = "abc"
    ) -> Bool? {
        var machine = started(head: headRequest, keepAlive: keepAlive)
        _ = machine.headReceived(head)
        if let body { _ = machine.bodyReceived(ByteBuffer(string: body)) }
        _ = machine.endReceived()
        guard case .finish(_, let reuse) = machine.readComplete() else { return nil }
        return reuse
    }

    @Test("an exchange goes idle → sendingRequest → awaitingHead → streamingBody → idle, one delivery per read batch")
    func happyPath() throws {
        var machine = Machine()
        #expect(machine.state == .idle)
        guard case .writeRequest(read: true) = machine.startExchange(isHeadRequest: false, keepAlive: true) else {
            Issue.record("expected the request to be written with a read")
            return
        }
        #expect(machine.state == .sendingRequest)
        _ = machine.requestWritten()
        #expect(machine.state == .awaitingHead)
        // Chunked: a body that streams (a small Content-Length body is held whole; see below).
        _ = machine.headReceived(Self.head(.ok, [("Transfer-Encoding", "chunked")]))
        #expect(machine.state == .streamingBody)
        _ = machine.bodyReceived(ByteBuffer(string: "ab"))
        _ = machine.bodyReceived(ByteBuffer(string: "cd"))
        guard case .deliver(let events, read: true) = machine.readComplete() else {
            Issue.record("expected one delivery")
            return
        }
        #expect(events.head?.status == 200)
        #expect(events.body.map { String(buffer: $0) } == "abcd")
        #expect(events.result == nil)
        _ = machine.bodyReceived(ByteBuffer(string: "ef"))
        _ = machine.endReceived()
        guard case .finish(let last, reuse: true) = machine.readComplete() else {
            Issue.record("expected the exchange to finish with the connection kept")
            return
        }
        #expect(last.head == nil)
        #expect(last.body.map { String(buffer: $0) } == "ef")
        #expect(machine.state == .idle)
        #expect(machine.readPending)
        // A second exchange on the same connection needs no new read: one is pending.
        guard case .writeRequest(read: false) = machine.startExchange(isHeadRequest: false, keepAlive: true) else {
            Issue.record("expected a write without a second read")
            return
        }
        #expect(machine.isReused)
    }

    @Test("a connection is kept only when both sides allow keep-alive and the body's end is known")
    func reuseRules() {
        #expect(Self.reuse(after: Self.head()) == true)
        #expect(Self.reuse(after: Self.head(.ok, [("Content-Length", "3"), ("Connection", "close")])) == false)
        #expect(Self.reuse(after: Self.head(.ok, version: .http1_0)) == false)
        #expect(Self.reuse(after: Self.head(.ok, version: .http1_0, [("Content-Length", "3"), ("Connection", "keep-alive")])) == true)
        #expect(Self.reuse(after: Self.head(.ok, [("Transfer-Encoding", "chunked")])) == true)
        #expect(Self.reuse(after: Self.head(.ok, [("Transfer-Encoding", "gzip")])) == false)
        #expect(Self.reuse(after: Self.head(.ok, [])) == false)  // ends by close
        #expect(Self.reuse(after: Self.head(.ok, []), headRequest: true, body: nil) == true)
        #expect(Self.reuse(after: Self.head(.noContent, []), body: nil) == true)
        #expect(Self.reuse(after: Self.head(.notModified, []), body: nil) == true)
        #expect(Self.reuse(after: Self.head(), keepAlive: false) == false)
    }

    @Test("a small Content-Length response is held, head included, until it is whole; a break before then delivers nothing")
    func smallResponseHeld() {
        var whole = Self.started()
        _ = whole.headReceived(Self.head(.ok, [("Content-Length", "6")]))
        _ = whole.bodyReceived(ByteBuffer(string: "abc"))
        guard case .read = whole.readComplete() else {
            Issue.record("half a small body: nothing delivered, read on")
            return
        }
        _ = whole.bodyReceived(ByteBuffer(string: "def"))
        _ = whole.endReceived()
        guard case .finish(let events, reuse: true) = whole.readComplete() else {
            Issue.record("expected head, body and end together")
            return
        }
        #expect(events.head?.contentLength == 6)
        #expect(events.body.map { String(buffer: $0) } == "abcdef")

        // Bytes beyond the body in the same read make the decoder fail: the exchange fails, having
        // delivered nothing, so the gateway can still answer 502.
        var overlong = Self.started()
        _ = overlong.headReceived(Self.head(.ok, [("Content-Length", "3")]))
        _ = overlong.bodyReceived(ByteBuffer(string: "abc"))
        _ = overlong.endReceived()
        guard case .fail(let error, retry: .never) = overlong.responseInvalid(HTTP1ResponseDecoder.invalid("bytes after the end")) else {
            Issue.record("expected the exchange to fail")
            return
        }
        #expect(error.kind == .badResponse)

        // A body cut short by a close fails the same way.
        var short = Self.started()
        _ = short.headReceived(Self.head(.ok, [("Content-Length", "10")]))
        _ = short.bodyReceived(ByteBuffer(string: "abc"))
        _ = short.readComplete()
        guard case .fail = short.channelInactive() else {
            Issue.record("expected the exchange to fail")
            return
        }

        // Over the bound, a body streams: its head is delivered with the first batch.
        var large = Self.started()
        _ = large.headReceived(Self.head(.ok, [("Content-Length", String(ResponseFraming.heldBodyLimit + 1))]))
        _ = large.bodyReceived(ByteBuffer(string: "abc"))
        guard case .deliver(let first, read: true) = large.readComplete() else {
            Issue.record("a large body streams")
            return
        }
        #expect(first.head?.contentLength == ResponseFraming.heldBodyLimit + 1)
    }

    @Test("conflicting framing that NIO's decoder lets through is refused by the shared rules")
    func sharedFramingRules() {
        var machine = Self.started()
        guard case .fail(let error, retry: .never) = machine.headReceived(Self.head(.ok, [("Content-Length", "+5")])) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(error.kind == .badResponse)
    }

    @Test("a response that ends before the request was written leaves the connection closed")
    func earlyAnswer() {
        var machine = Machine()
        _ = machine.startExchange(isHeadRequest: false, keepAlive: true)
        _ = machine.headReceived(Self.head(.payloadTooLarge, [("Content-Length", "0")]))
        _ = machine.endReceived()
        guard case .finish(_, reuse: false) = machine.readComplete() else {
            Issue.record("expected the connection to close")
            return
        }
        #expect(machine.state == .closed)
    }

    @Test("reading stops at the high watermark and resumes at the low one")
    func backPressure() {
        var machine = Self.started(high: 100, low: 40)
        _ = machine.headReceived(Self.head(.ok, [("Transfer-Encoding", "chunked")]))
        _ = machine.bodyReceived(ByteBuffer(repeating: 0, count: 60))
        guard case .deliver(_, read: true) = machine.readComplete() else {
            Issue.record("under the high watermark: read on")
            return
        }
        _ = machine.bodyReceived(ByteBuffer(repeating: 0, count: 60))
        guard case .deliver(_, read: false) = machine.readComplete() else {
            Issue.record("over the high watermark: no read")
            return
        }
        #expect(machine.outstanding == 120)
        #expect(!machine.readPending)
        guard case .none = machine.consumed(50) else {
            Issue.record("70 outstanding is above the low watermark")
            return
        }
        guard case .read = machine.consumed(30) else {
            Issue.record("40 outstanding: read again")
            return
        }
        guard case .none = machine.consumed(40) else {
            Issue.record("a read is already pending")
            return
        }
        #expect(machine.outstanding == 0)
    }

    @Test("a failure drops a head that was not delivered yet, so the gateway can still answer 502")
    func failureDropsUndeliveredHead() {
        var machine = Self.started()
        _ = machine.headReceived(Self.head())
        _ = machine.bodyReceived(ByteBuffer(string: "abc"))
        _ = machine.endReceived()
        // Bytes after the response, in the same read batch: the decoder reports them as an error.
        guard case .fail(let error, retry: .never) = machine.responseInvalid(HTTP1ResponseDecoder.invalid("bytes after the end")) else {
            Issue.record("expected the exchange to fail")
            return
        }
        #expect(error.kind == .badResponse)
        #expect(machine.state == .closed)
        guard case .none = machine.readComplete() else {
            Issue.record("nothing is delivered after a failure")
            return
        }
    }

    @Test("only a transport failure of a reused connection before any response may be retried")
    func retryClassification() {
        func reused() -> Machine {
            var machine = Machine()
            _ = machine.startExchange(isHeadRequest: false, keepAlive: true)
            _ = machine.requestWritten()
            _ = machine.headReceived(Self.head())
            _ = machine.bodyReceived(ByteBuffer(string: "abc"))
            _ = machine.endReceived()
            _ = machine.readComplete()
            _ = machine.startExchange(isHeadRequest: false, keepAlive: true)
            _ = machine.requestWritten()
            return machine
        }
        var stale = reused()
        guard case .fail(_, retry: .ifIdempotent) = stale.channelInactive() else {
            Issue.record("a reused connection closed before answering: retry idempotent requests")
            return
        }
        var reset = reused()
        guard case .fail(_, retry: .ifIdempotent) = reset.errorCaught(IOError(errnoCode: 104, reason: "read")) else {
            Issue.record("a reset before answering: retry idempotent requests")
            return
        }
        var first = Self.started()
        guard case .fail(_, retry: .never) = first.channelInactive() else {
            Issue.record("a fresh connection's failure is the backend's answer")
            return
        }
        var garbage = reused()
        guard case .fail(_, retry: .never) = garbage.responseInvalid(HTTP1ResponseDecoder.invalid("not a status line")) else {
            Issue.record("a broken response is never retried")
            return
        }
        var midway = reused()
        _ = midway.headReceived(Self.head())
        guard case .fail(_, retry: .never) = midway.channelInactive() else {
            Issue.record("a response that began is never retried")
            return
        }
    }

    @Test("an idle connection keeps a read pending, is forgotten when it closes and closed when it receives anything")
    func idleConnection() {
        var machine = Machine()
        guard case .read = machine.readComplete() else {
            Issue.record("an idle connection reads on")
            return
        }
        guard case .forget = machine.channelInactive() else {
            Issue.record("closed while idle: the pool forgets it")
            return
        }
        var chatty = Machine()
        guard case .close = chatty.headReceived(Self.head()) else {
            Issue.record("a response nobody asked for closes the connection")
            return
        }
        guard case .unavailable = chatty.startExchange(isHeadRequest: false, keepAlive: true) else {
            Issue.record("a closed connection takes no exchange")
            return
        }
    }

    @Test("a body that ends by close completes the exchange and closes the connection")
    func closeDelimited() {
        var machine = Self.started()
        _ = machine.headReceived(Self.head(.ok, []))
        _ = machine.bodyReceived(ByteBuffer(string: "all of it"))
        _ = machine.endReceived()  // the decoder ends the body at EOF, before channelInactive
        guard case .finish(let events, reuse: false) = machine.channelInactive() else {
            Issue.record("expected success without reuse")
            return
        }
        #expect(events.head?.status == 200)
        #expect(events.body.map { String(buffer: $0) } == "all of it")
    }

    @Test("cancel closes without delivering; shutdown fails the exchange; a second head is a protocol error")
    func cancelAndShutdown() {
        var cancelled = Self.started()
        _ = cancelled.headReceived(Self.head())
        guard case .close = cancelled.cancel() else {
            Issue.record("cancel closes")
            return
        }
        guard case .none = cancelled.readComplete() else {
            Issue.record("nothing after a cancel")
            return
        }
        var stopping = Self.started()
        guard case .fail(let error, retry: .never) = stopping.shutdown() else {
            Issue.record("shutdown fails the exchange")
            return
        }
        #expect(error.kind == .shutdown)
        var twice = Self.started()
        _ = twice.headReceived(Self.head())
        guard case .fail(let protocolError, retry: .never) = twice.headReceived(Self.head()) else {
            Issue.record("a second head fails the exchange")
            return
        }
        #expect(protocolError.kind == .badResponse)
        var upgraded = Self.started()
        guard case .fail = upgraded.headReceived(Self.head(.switchingProtocols, [])) else {
            Issue.record("an upgrade nobody asked for fails the exchange")
            return
        }
    }
}

extension UpstreamConnectionStateMachine {
    /// What the connection hands the machine for `head`, as ``HTTP1ResponseDecoder`` reads it: an
    /// interim head, a final one with its framing, or the framing's refusal.
    mutating func headReceived(_ head: HTTPResponseHead) -> Action {
        let status = Int(head.status.code)
        if status < 200 { return interimReceived(status: status) }
        switch ResponseFraming.of(status: status, headers: head.headers, requestIsHEAD: isHeadRequest) {
        case .failure(let error):
            return responseInvalid(error)
        case .success(let framing):
            let received = UpstreamResponseHead(status: status, headers: head.headers, contentLength: framing.contentLength)
            return headReceived(received, framing: framing, keepAlive: head.isKeepAlive)
        }
    }
}
