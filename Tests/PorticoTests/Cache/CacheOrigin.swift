import Foundation
import NIOCore
import NIOHTTP1
import PorticoDemoBackends
import Synchronization

/// An origin for the cache's tests: answers each path as the test set it, evaluates
/// `If-None-Match` against the answer's `ETag` (a 304 with the answer's fields), and records
/// every request it receives, so a test can count what reached it and read what it was sent.
final class CacheOrigin: Sendable {
    struct Answer: Sendable {
        var status: Int = 200
        var headers: [(String, String)] = []
        var body: String = ""
        /// Closes the connection instead of answering.
        var crashes = false
    }

    private struct State {
        var answers: [String: Answer] = [:]
        var received: [BackendRequest] = []
    }

    private let state = Mutex(State())

    /// Sets what `path` answers from now on.
    func answer(_ path: String, status: Int = 200, headers: [(String, String)] = [], body: String = "") {
        state.withLock { $0.answers[path] = Answer(status: status, headers: headers, body: body) }
    }

    /// From now on `path` gets no answer: the connection closes.
    func crash(_ path: String) {
        state.withLock { $0.answers[path] = Answer(crashes: true) }
    }

    /// Requests received for `path` (every path when nil).
    func requests(_ path: String? = nil) -> [BackendRequest] {
        state.withLock { state in state.received.filter { path == nil || $0.path == path! } }
    }

    func count(_ path: String? = nil) -> Int { requests(path).count }

    var handler: BackendServer.Handler {
        { [self] request in
            let answer: Answer = state.withLock { state in
                state.received.append(request)
                return state.answers[String(request.path)] ?? Answer(status: 404, body: "{}")
            }
            if answer.crashes { return .close }
            var headers = HTTPHeaders(answer.headers)
            let etag = headers.first(name: "etag")
            if let etag, answer.status == 200, let condition = request.headers.first(name: "if-none-match"),
                condition.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag })
            {
                return .full(status: .notModified, headers: headers, body: ByteBuffer())
            }
            if !headers.contains(name: "content-type") { headers.add(name: "content-type", value: "application/json") }
            return .full(status: HTTPResponseStatus(statusCode: answer.status), headers: headers, body: ByteBuffer(string: answer.body))
        }
    }
}
