import NIOConcurrencyHelpers

/// Credit-based back-pressure between a curl thread (producer) and an event loop (consumer).
///
/// The curl thread reserves credit for each body chunk it takes from libcurl; the event loop returns
/// credit when the chunk has been written to the client. With too much outstanding the curl side
/// pauses the transfer (`CURL_WRITEFUNC_PAUSE`), and the consumer's return of credit below the low
/// watermark tells it to resume. Both sides take the lock briefly and never across I/O, and the
/// pause decision and the resume decision are made under the same lock, so no wake-up is lost.
final class FlowControl: Sendable {
    private struct State {
        var outstanding = 0
        var paused = false
    }

    let highWatermark: Int
    let lowWatermark: Int
    private let state = NIOLockedValueBox(State())

    init(highWatermark: Int = 256 * 1024, lowWatermark: Int = 64 * 1024) {
        self.highWatermark = highWatermark
        self.lowWatermark = lowWatermark
    }

    /// Curl thread: takes `bytes` of credit, or marks the transfer paused and returns false.
    func reserve(_ bytes: Int) -> Bool {
        state.withLockedValue { state in
            if state.outstanding >= highWatermark {
                state.paused = true
                return false
            }
            state.outstanding += bytes
            return true
        }
    }

    /// Consumer: returns credit; true when the transfer was paused and should now resume.
    func release(_ bytes: Int) -> Bool {
        state.withLockedValue { state in
            state.outstanding -= bytes
            if state.paused && state.outstanding <= lowWatermark {
                state.paused = false
                return true
            }
            return false
        }
    }

    var outstanding: Int { state.withLockedValue { $0.outstanding } }
}
