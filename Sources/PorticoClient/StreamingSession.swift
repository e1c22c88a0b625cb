import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `URLSession`, made on first use, whose delegate passes each answer's head and body chunks on as
/// they arrive: how an event stream is read with URLSession on every platform (Linux's
/// FoundationNetworking has neither `bytes(for:)` nor per-task delegates). It is invalidated when
/// the façade that made it goes. `@unchecked`: its configuration is a copy no one changes after init,
/// and the session is behind a lock.
final class StreamingSession: @unchecked Sendable {
    private let configuration: URLSessionConfiguration
    private let delegate: StreamingDelegate
    private let session = Locked<URLSession?>(nil)

    init(configuration: URLSessionConfiguration, trust: ServerTrust) {
        // A copy: a stream's requests carry their own idle timeout, and nothing of it is cached.
        let copy = configuration.copy() as! URLSessionConfiguration
        copy.urlCache = nil
        copy.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.configuration = copy
        self.delegate = StreamingDelegate(trust: trust)
    }

    deinit {
        session.withLock { $0?.invalidateAndCancel() }
    }

    func start(_ request: URLRequest) async throws -> StreamedAnswer {
        let session = session.withLock { made in
            if let made { return made }
            let new = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
            made = new
            return new
        }
        return try await delegate.start(request, in: session)
    }
}

/// The streaming session's delegate: one ``Transfer`` per task, found by its identifier.
final class StreamingDelegate: NSObject, URLSessionDataDelegate, Sendable {
    /// A task's waiter for its head, and its body until the head hands it on (kept no longer, so
    /// that the reader dropping the body ends the stream and cancels the task), then its body's
    /// continuation.
    struct Transfer {
        var head: CheckedContinuation<StreamedAnswer, any Error>?
        var body: AsyncThrowingStream<Data, any Error>?
        let chunks: AsyncThrowingStream<Data, any Error>.Continuation
    }

    let trust: ServerTrust
    private let transfers = Locked<[Int: Transfer]>([:])

    init(trust: ServerTrust) {
        self.trust = trust
    }

    func start(_ request: URLRequest, in session: URLSession) async throws -> StreamedAnswer {
        let task = TaskBox(session.dataTask(with: request))
        let (body, chunks) = AsyncThrowingStream<Data, any Error>.makeStream()
        // The body's end, or its reader going away, ends the transfer; after a normal end the
        // task is already complete and cancelling it does nothing.
        chunks.onTermination = { _ in task.task.cancel() }
        let id = task.task.taskIdentifier
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { head in
                transfers.withLock { $0[id] = Transfer(head: head, body: body, chunks: chunks) }
                // Cancelled before this point, the handler below found no transfer to end: the
                // task is never started, and the caller is told here.
                if Task.isCancelled, let transfer = transfers.withLock({ $0.removeValue(forKey: id) }) {
                    transfer.chunks.finish(throwing: URLError(.cancelled))
                    return head.resume(throwing: URLError(.cancelled))
                }
                task.task.resume()
            }
        } onCancel: {
            // A head still awaited is answered now: a task cancelled before it started may report
            // its completion before, or never after, its transfer is known.
            let waiting = transfers.withLock { transfers -> Transfer? in
                guard transfers[id]?.head != nil else { return nil }
                return transfers.removeValue(forKey: id)
            }
            if let waiting {
                waiting.chunks.finish(throwing: URLError(.cancelled))
                waiting.head?.resume(throwing: URLError(.cancelled))
            }
            task.task.cancel()
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let waiter = transfers.withLock { transfers -> (CheckedContinuation<StreamedAnswer, any Error>, StreamedAnswer)? in
            guard let transfer = transfers[dataTask.taskIdentifier], let head = transfer.head, let body = transfer.body else { return nil }
            transfers[dataTask.taskIdentifier]?.head = nil
            transfers[dataTask.taskIdentifier]?.body = nil
            let http = response as? HTTPURLResponse
            var headers: [String: String] = [:]
            for (name, value) in http?.allHeaderFields ?? [:] {
                if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
            }
            return (head, StreamedAnswer(status: http?.statusCode ?? 0, headers: headers, body: body))
        }
        completionHandler(waiter == nil ? .cancel : .allow)
        if let (head, answer) = waiter { head.resume(returning: answer) }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        _ = transfers.withLock { $0[dataTask.taskIdentifier]?.chunks }?.yield(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let transfer = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let head = transfer.head {
            head.resume(throwing: error ?? URLError(.badServerResponse))
        }
        if let error {
            transfer.chunks.finish(throwing: error)
        } else {
            transfer.chunks.finish()
        }
    }

    #if canImport(Security)
    func urlSession(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge
    ) async -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        guard !trust.isSystem, challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
            let serverTrust = challenge.protectionSpace.serverTrust
        else { return (.performDefaultHandling, nil) }
        return trust.evaluate(serverTrust) ? (.useCredential, URLCredential(trust: serverTrust)) : (.cancelAuthenticationChallenge, nil)
    }
    #endif
}

/// A task handed to the cancellation handler: URLSession's tasks are thread-safe, not `Sendable`.
private struct TaskBox: @unchecked Sendable {
    let task: URLSessionDataTask

    init(_ task: URLSessionDataTask) { self.task = task }
}
