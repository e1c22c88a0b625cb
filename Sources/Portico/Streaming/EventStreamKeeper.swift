import NIOCore

/// Watches one event stream (`text/event-stream`) on its way to the client: it knows whether the
/// bytes written so far end between two events, sends a comment when the stream has been quiet
/// for the service's `heartbeat`, and ends the response at the service's `limits.streamMaxLifetime`.
///
/// A heartbeat is the comment line `: keep-alive` and a blank line, written only between events
/// (a comment inside an event would join its lines), never counted against the backend's flow
/// control. It exists because proxies, load balancers and mobile networks between the gateway and
/// the client drop connections that carry nothing for a minute or so; the backend need not know.
/// Confined to the connection's event loop; its owner calls ``stop()`` when the response ends.
final class EventStreamKeeper {
    /// What the keeper asks of the connection's handler.
    struct Actions {
        /// Writes and flushes these bytes to the client as more of the response's body.
        let write: (ByteBuffer) -> Void
        /// The stream reached its lifetime: end the response.
        let expire: () -> Void
    }

    static let heartbeatComment = ": keep-alive\n\n"

    private let eventLoop: any EventLoop
    private let heartbeat: TimeAmount?
    private let actions: Actions
    private var heartbeatTimer: Scheduled<Void>?
    private var lifetimeTimer: Scheduled<Void>?
    /// The last four bytes written, the latest in the low byte.
    private var tail: UInt32 = 0x0A0A
    private var lastWrite: NIODeadline
    /// Heartbeats written (for the tests and the access log's byte count).
    private(set) var heartbeats = 0

    init(eventLoop: any EventLoop, heartbeat: Duration?, maxLifetime: Duration?, actions: Actions) {
        self.eventLoop = eventLoop
        self.heartbeat = heartbeat.map(TimeAmount.init)
        self.actions = actions
        lastWrite = eventLoop.now
        let loop = eventLoop.assumeIsolated()
        if let maxLifetime {
            lifetimeTimer = loop.scheduleTask(in: TimeAmount(maxLifetime)) { [self] in
                stop()
                actions.expire()
            }
        }
        if let interval = self.heartbeat { heartbeatTimer = loop.scheduleTask(in: interval) { [self] in heartbeatDue() } }
    }

    /// Whether what has been written ends an event (or nothing but the head has been): a blank
    /// line after the last line, in any of the three line endings the format allows.
    var atEventBoundary: Bool {
        tail & 0xFFFF == 0x0A0A || tail & 0xFFFF == 0x0D0D || tail == 0x0D0A_0D0A
    }

    /// Body bytes of the backend's were written to the client.
    func written(_ body: ByteBuffer) {
        lastWrite = eventLoop.now
        for byte in body.readableBytesView.suffix(4) { tail = tail << 8 | UInt32(byte) }
    }

    func stop() {
        heartbeatTimer?.cancel()
        lifetimeTimer?.cancel()
        heartbeatTimer = nil
        lifetimeTimer = nil
    }

    private func heartbeatDue() {
        guard let heartbeat, heartbeatTimer != nil else { return }
        let quiet = eventLoop.now - lastWrite
        if quiet >= heartbeat, atEventBoundary {
            heartbeats += 1
            lastWrite = eventLoop.now
            actions.write(ByteBuffer(string: Self.heartbeatComment))
        }
        // Mid-event, the next try is a whole interval on: an event begun is under way.
        let wait = quiet >= heartbeat ? heartbeat : heartbeat - quiet
        heartbeatTimer = eventLoop.assumeIsolated().scheduleTask(in: wait) { [self] in heartbeatDue() }
    }
}
