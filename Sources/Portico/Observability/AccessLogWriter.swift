import Foundation
import NIOConcurrencyHelpers
import NIOCore
import PorticoPolicy

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The access log's own writer: each line is formatted on the thread that ends the exchange (an
/// event loop) straight into bytes (``AccessLogLine``), appended to a shared buffer, and written to
/// the file descriptor by a thread of its own, in batches: when the buffer passes ``batchBytes``, or
/// every ``flushInterval``, and once more at ``shutdown()``.
///
/// An event loop never waits on the output: it only takes the buffer's lock to append. If the
/// output cannot keep up (a blocked pipe) and ``maxBufferedBytes`` are waiting, further lines are
/// dropped and counted (``droppedLines``) rather than growing memory or stalling requests.
///
/// swift-log's `StreamLogHandler`, which this replaces for access lines, sorted a metadata
/// dictionary, formatted the time with `strftime` and flushed stdout on every request.
public final class AccessLogWriter: Sendable {
    public let format: AccessLogFormat
    /// A batch is written as soon as this much is waiting.
    public let batchBytes: Int
    /// What is waiting is written at least this often.
    public let flushInterval: Duration
    /// Over this, lines are dropped until the writer thread catches up.
    public let maxBufferedBytes: Int
    private let output: Int32
    private let line: AccessLogLine
    private let state: NIOLockedValueBox<State>
    /// Signalled when a batch is full, at shutdown, and when the writer thread has written one.
    private let condition: NSConditionBox

    private struct State {
        var pending: [UInt8] = []
        var dropped = 0
        var written = 0
        var stopping = false
        var stopped = false
        /// A ``flush()`` is waiting: write now, whatever the batch's size.
        var flushRequested = false
    }

    /// - Parameters:
    ///   - output: the file descriptor lines are written to (standard output by default); the
    ///     writer does not close it.
    public init(
        format: AccessLogFormat, output: Int32 = STDOUT_FILENO, batchBytes: Int = 64 * 1024,
        flushInterval: Duration = .milliseconds(5), maxBufferedBytes: Int = 8 * 1024 * 1024
    ) {
        self.format = format
        self.output = output
        self.batchBytes = batchBytes
        self.flushInterval = flushInterval
        self.maxBufferedBytes = maxBufferedBytes
        self.line = AccessLogLine(format: format)
        var state = State()
        state.pending.reserveCapacity(batchBytes * 2)
        self.state = NIOLockedValueBox(state)
        self.condition = NSConditionBox()
        let thread = Thread { [self] in self.run() }
        thread.name = "portico.access-log"
        thread.start()
    }

    /// Lines dropped because the output could not keep up.
    public var droppedLines: Int { state.withLockedValue { $0.dropped } }

    /// Formats `record` and queues its line; called on the event loop that ended the exchange.
    func write(_ record: AccessRecord) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(320)
        line.append(record, now: .now(), wallClockNanos: Self.wallClockNanos(), to: &bytes)
        append(bytes)
    }

    /// Queues an already formatted line.
    func append(_ bytes: [UInt8]) {
        let full = state.withLockedValue { state -> Bool in
            // Once stopping, the writer's last batch may already be taken: a later line would sit
            // in a buffer nobody writes, so it is dropped and counted instead.
            guard !state.stopping, !state.stopped, state.pending.count + bytes.count <= maxBufferedBytes else {
                state.dropped += 1
                return false
            }
            state.pending.append(contentsOf: bytes)
            return state.pending.count >= batchBytes
        }
        if full { condition.signal() }
    }

    /// Writes what is waiting now and returns once it is written (tests, and the last lines at
    /// shutdown).
    public func flush() {
        let target = state.withLockedValue { state -> Int in
            state.flushRequested = true
            return state.written + state.pending.count
        }
        condition.signal()
        condition.wait { self.state.withLockedValue { $0.written >= target || $0.stopped } }
    }

    /// Writes what is waiting, then stops the writer thread; later lines are dropped and counted.
    ///
    /// Waits at most `timeout`: an output nobody reads (a full pipe) can block the writer's
    /// `write(2)` for ever, and shutting down must not wait for it. Returns whether everything
    /// queued was written.
    @discardableResult
    public func shutdown(timeout: Duration = .seconds(5)) -> Bool {
        state.withLockedValue { $0.stopping = true }
        condition.signal()
        condition.wait(timeout: Self.seconds(timeout)) { self.state.withLockedValue { $0.stopped } }
        return state.withLockedValue { $0.stopped }
    }

    /// A duration as the seconds the condition's timed wait takes.
    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private func run() {
        let interval = Self.seconds(flushInterval)
        // Two buffers trade places: the event loops append to one while this thread writes the
        // other, and each keeps its capacity, so appending never allocates or faults in new pages
        // once both have grown to a batch's size.
        var batch: [UInt8] = []
        batch.reserveCapacity(batchBytes * 2)
        while true {
            condition.wait(timeout: interval) {
                self.state.withLockedValue { $0.pending.count >= self.batchBytes || $0.stopping || $0.flushRequested }
            }
            let stopping = state.withLockedValue { state -> Bool in
                state.flushRequested = false
                swap(&state.pending, &batch)
                return state.stopping
            }
            writeAll(batch)
            state.withLockedValue {
                $0.written += batch.count
                if stopping { $0.stopped = true }
            }
            batch.removeAll(keepingCapacity: true)
            condition.broadcast()
            if stopping { return }
        }
    }

    private func writeAll(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let count = systemWrite(output, buffer.baseAddress! + offset, buffer.count - offset)
                if count < 0 && errno == EINTR { continue }
                // A closed or broken output: nothing more can be written there; the lines are lost.
                guard count > 0 else { return }
                offset += count
            }
        }
    }

    private static func wallClockNanos() -> Int64 {
        // Through Foundation rather than `clock_gettime`: `timespec` is defined both by Glibc and by
        // the Foundation a dependency re-exports, and a release build that sees both refuses its
        // fields. Microseconds are more than a log line shows.
        Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()) * 1000
    }
}

/// `write(2)`, named apart from the writer's own `write(_:)`.
private func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, bytes, count)
}

/// A condition variable whose waits re-check a predicate, so a signal given before a wait starts
/// is never lost.
private final class NSConditionBox: @unchecked Sendable {  // NSCondition is thread-safe
    private let condition = NSCondition()

    func signal() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    func broadcast() { signal() }

    func wait(until ready: () -> Bool) {
        condition.lock()
        while !ready() { condition.wait() }
        condition.unlock()
    }

    /// Waits until `ready` or `timeout` seconds pass.
    func wait(timeout: Double, until ready: () -> Bool) {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        while !ready() {
            if !condition.wait(until: deadline) { break }
        }
        condition.unlock()
    }
}
