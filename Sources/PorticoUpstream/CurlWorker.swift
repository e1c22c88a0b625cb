import CPorticoCurl
import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// One dedicated thread driving one libcurl multi handle.
///
/// SwiftNIO offers no way to watch arbitrary file descriptors, so libcurl cannot run on the event
/// loops. Each worker loops: take the queued commands → `curl_multi_perform` → collect finished
/// transfers → ship the turn's events to the event loops → `curl_multi_poll`. Other threads only
/// append to the command queue and call `curl_multi_wakeup`, and only when the queue was empty, so a
/// burst of requests costs one wake-up. Every libcurl call and callback happens on this thread.
final class CurlWorker: @unchecked Sendable {
    enum Command {
        case start(
            UpstreamRequest, id: Int, eventLoop: any EventLoop, handler: NIOLoopBound<any UpstreamResponseHandler>, flow: FlowControl)
        case cancel(id: Int)
        case resume(id: Int)
    }

    private struct Inbox {
        var commands: [Command] = []
        var stopping = false
    }

    // Shared with other threads.
    private let inbox = NIOLockedValueBox(Inbox())
    private let multi: UnsafeMutableRawPointer
    private let stopped = ConditionLock(value: false)

    // Confined to the worker thread.
    private var active: [Int: CurlTransfer] = [:]
    private var idleHandles: [UnsafeMutableRawPointer] = []
    /// The sockets of the connections libcurl keeps; also reached by libcurl's close-socket callback.
    let sockets = BackendSockets()
    private let maxIdleHandles = 256

    init(name: String, maxConnectionsPerHost: Int, maxIdleConnections: Int) {
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        _ = portico_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxConnectionsPerHost)
        _ = portico_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxIdleConnections)
        _ = portico_multi_setopt_long(multi, CURLMOPT_PIPELINING, 0)  // HTTP/1.1, no multiplexing
        let thread = Thread { [self] in
            Thread.current.name = name  // set from the thread itself so the OS (top, perf) sees it
            self.run()
        }
        thread.start()
    }

    /// Any thread: queue a command and wake the worker if it may be sleeping. Returns false, and
    /// queues nothing, once the worker is stopping: the caller answers for the command itself.
    @discardableResult
    func submit(_ command: Command) -> Bool {
        // The wake-up happens under the lock: the worker frees the multi handle only after a last
        // drain under this lock, so a wake-up outside it could touch a freed handle at shutdown.
        inbox.withLockedValue { inbox in
            guard !inbox.stopping else { return false }
            if inbox.commands.isEmpty { curl_multi_wakeup(multi) }
            inbox.commands.append(command)
            return true
        }
    }

    /// Any thread: ends the loop, failing what is in flight, and waits for the thread to finish.
    func stop() {
        inbox.withLockedValue { inbox in
            guard !inbox.stopping else { return }
            inbox.stopping = true
            curl_multi_wakeup(multi)
        }
        stopped.lock(whenValue: true)
        stopped.unlock()
    }

    // MARK: The loop (worker thread only)

    private func run() {
        var running: Int32 = 0
        while true {
            let (commands, stopping) = inbox.withLockedValue { inbox in
                defer { inbox.commands.removeAll(keepingCapacity: true) }
                return (inbox.commands, inbox.stopping)
            }
            if stopping {
                // No command can be queued after `stopping` was set, so these are the last ones.
                for case .start(_, _, let eventLoop, let handler, _) in commands {
                    let events = UpstreamEvents(result: .failure(UpstreamError(.shutdown, detail: "upstream client shut down")))
                    eventLoop.execute { handler.value.upstreamReceived(events) }
                }
                break
            }
            for command in commands { perform(command) }

            curl_multi_perform(multi, &running)
            collectFinished()
            for transfer in active.values where transfer.isDirty { transfer.ship() }

            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        for id in Array(active.keys) {
            finish(id, result: .failure(UpstreamError(.shutdown, detail: "upstream client shut down")))
        }
        for handle in idleHandles { curl_easy_cleanup(handle) }
        idleHandles.removeAll()
        curl_multi_cleanup(multi)
        stopped.lock()
        stopped.unlock(withValue: true)
    }

    private func perform(_ command: Command) {
        switch command {
        case .start(let request, let id, let eventLoop, let handler, let flow):
            let transfer = CurlTransfer(
                id: id, eventLoop: eventLoop, handler: handler, flow: flow, requestIsHEAD: request.method == "HEAD",
                peeksForExcess: request.url.utf8.starts(with: "http://".utf8), sockets: sockets)
            let handle = idleHandles.popLast() ?? curl_easy_init()!
            transfer.easy = handle
            active[id] = transfer
            // A field HTTP/1.1 cannot carry was left out of the lines (``FieldLines``): refused, not
            // sent without it.
            guard request.headers.isSendable else {
                finish(id, result: .failure(.unsendableRequest), added: false)
                return
            }
            if let problem = configure(handle, for: request, transfer: transfer) {
                finish(id, result: .failure(UpstreamError(.invalidRequest, detail: problem)), added: false)
                return
            }
            let code = curl_multi_add_handle(multi, handle)
            if code != CURLM_OK {
                let message = String(cString: curl_multi_strerror(code))
                finish(id, result: .failure(UpstreamError(.invalidRequest, detail: message)), added: false)
            }
        case .cancel(let id):
            if active[id] != nil { finish(id, result: nil) }
        case .resume(let id):
            // May call the write callback before it returns; that is fine on this thread.
            if let transfer = active[id], let easy = transfer.easy {
                curl_easy_pause(easy, portico_curlpause_cont())
            }
        }
    }

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            var privateData: UnsafeMutableRawPointer?
            _ = portico_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &privateData)
            guard let privateData else { continue }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(privateData).takeUnretainedValue()
            if transfer.restartsAfterStaleConnection() {
                // Same handle, same options: libcurl picks another connection or opens one.
                curl_multi_remove_handle(multi, easy)
                if curl_multi_add_handle(multi, easy) == CURLM_OK { continue }
                finish(transfer.id, result: .failure(UpstreamError(.badResponse, detail: "could not restart the exchange")), added: false)
                continue
            }
            finish(transfer.id, result: result(of: transfer, code: code, easy: easy))
        }
    }

    private func result(of transfer: CurlTransfer, code: CURLcode, easy: UnsafeMutableRawPointer) -> Result<UpstreamMetrics, UpstreamError>
    {
        // A framing failure is the cause even when libcurl reports success (it dropped the excess)
        // or a failure of its own (the callback that found it aborted the transfer).
        if let failure = transfer.framingFailure { return .failure(failure) }
        let detail = transfer.errorMessage.isEmpty ? String(cString: curl_easy_strerror(code)) : transfer.errorMessage
        switch code {
        case CURLE_OK:
            var connects = 0
            _ = portico_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
            guard transfer.headReceived else {
                return .failure(UpstreamError(.badResponse, detail: "exchange ended without a final response head"))
            }
            // libcurl reports a short body as CURLE_PARTIAL_FILE; counting here as well keeps a held
            // body from ever being shipped short, whatever a libcurl version does.
            if case .length(let declared)? = transfer.framing?.body, transfer.bodyReceived != declared {
                return .failure(
                    UpstreamError(.badResponse, detail: "body ended after \(transfer.bodyReceived) of \(declared) declared bytes"))
            }
            return .success(UpstreamMetrics(duration: ContinuousClock.now - transfer.started, newConnections: connects))
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .failure(UpstreamError(.connectFailed, detail: detail))
        case CURLE_OPERATION_TIMEDOUT:
            // Past an event stream's head, the limit that ran out was the wait for its next event.
            if let wait = transfer.eventWait, transfer.headReceived {
                return .failure(UpstreamError(.timedOut, detail: "no event within \(wait) (\(detail))"))
            }
            return .failure(UpstreamError(.timedOut, detail: detail))
        default:
            return .failure(UpstreamError(.badResponse, detail: detail))
        }
    }

    /// Removes a transfer, ships what it still holds (and `result`, unless it was cancelled) and
    /// recycles its easy handle.
    private func finish(_ id: Int, result: Result<UpstreamMetrics, UpstreamError>?, added: Bool = true) {
        guard let transfer = active.removeValue(forKey: id) else { return }
        if let easy = transfer.easy {
            if added { curl_multi_remove_handle(multi, easy) }
            transfer.easy = nil
            if idleHandles.count < maxIdleHandles {
                curl_easy_reset(easy)
                idleHandles.append(easy)
            } else {
                curl_easy_cleanup(easy)
            }
        }
        if let result { transfer.ship(finishing: result) }
    }
}
