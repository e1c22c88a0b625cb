import NIOCore
import NIOHTTP1
import PorticoUpstream
import Synchronization

/// A backend that answers at once, on the channel's event loop, with no network: the test double
/// the gateway target forwards through.
///
/// What it answers depends on the path it is asked for, so that the fuzzer can steer every way an
/// exchange ends: `/fail` (refused before a head: 502), `/slow` (timed out: 504), `/cut` (a head and
/// some body, then broken), `/chunks` (the body in two deliveries), anything else a small 200. It
/// also checks what the gateway forwards (``checkForwarded(_:)``).
final class ImmediateUpstreamClient: UpstreamClient {
    /// Answers cut short (`/cut`) since the count was last reset: the gateway's output then ends
    /// inside a response, rightly. Counted here, by the URL the gateway forwarded, since the
    /// client's bytes may spell the path otherwise (`/c%75t`).
    let cutAnswers = Atomic<Int>(0)

    func execute(_ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler) -> any UpstreamTask {
        Self.checkForwarded(request)
        let handler = NIOLoopBound(handler, eventLoop: eventLoop)
        let metrics = UpstreamMetrics(duration: .microseconds(1), newConnections: 0)
        let head = UpstreamResponseHead(
            status: 200,
            headers: HTTPHeaders([
                ("Content-Type", "text/plain"), ("Connection", "x-hop"), ("X-Hop", "dropped"), ("Keep-Alive", "timeout=5"),
                ("X-Request-Id", "from-the-backend"),
            ]))
        let body = ByteBuffer(string: "ok\n")
        let url = request.url
        if url.contains("/fail") {
            eventLoop.execute { handler.value.upstreamReceived(UpstreamEvents(result: .failure(.init(.connectFailed, detail: "refused")))) }
        } else if url.contains("/slow") {
            eventLoop.execute { handler.value.upstreamReceived(UpstreamEvents(result: .failure(.init(.timedOut, detail: "slow")))) }
        } else if url.contains("/cut") {
            cutAnswers.add(1, ordering: .relaxed)
            eventLoop.execute {
                handler.value.upstreamReceived(UpstreamEvents(head: head, body: body))
                handler.value.upstreamReceived(UpstreamEvents(result: .failure(.init(.badResponse, detail: "closed early"))))
            }
        } else if url.contains("/chunks") {
            eventLoop.execute { handler.value.upstreamReceived(UpstreamEvents(head: head, body: body)) }
            eventLoop.execute { handler.value.upstreamReceived(UpstreamEvents(body: body, result: .success(metrics))) }
        } else {
            eventLoop.execute { handler.value.upstreamReceived(UpstreamEvents(head: head, body: body, result: .success(metrics))) }
        }
        return ImmediateTask()
    }

    func shutdown() {}

    /// What the proxy must never forward: hop-by-hop fields, a second `Host`, the API key of a
    /// key-only service; and it only ever calls the policy's backends.
    static func checkForwarded(_ request: UpstreamRequest) {
        precondition(request.url.hasPrefix("http://127.0.0.1:9/"), "forwarded to a URL off the backends: \(request.url)")
        let names = request.headers.map { $0.name.lowercased() }
        for hop in ["connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection", "trailer"] {
            precondition(!names.contains(hop), "the hop-by-hop field \(hop) was forwarded")
        }
        precondition(
            names.filter { $0 == "host" }.count == 1, "the forwarded request has \(names.filter { $0 == "host" }.count) Host fields")
        if request.url.hasPrefix("http://127.0.0.1:9/keyed-backend") {
            precondition(!names.contains("x-api-key"), "a key-only service's API key was forwarded")
        }
    }
}

/// Nothing to cancel or pace: every answer is already queued.
struct ImmediateTask: UpstreamTask {
    func cancel() {}
    func consumed(bytes: Int) {}
}
