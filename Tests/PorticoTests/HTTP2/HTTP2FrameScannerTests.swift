import NIOCore
import Testing

@testable import Portico

/// The scanner under ``HTTP2ConnectionGuard``, fed bytes cut at every possible point.
@Suite struct HTTP2FrameScannerTests {
    static let preface = HTTP2FrameScanner.preface

    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, payloadLength: Int) -> [UInt8] {
        RawHTTP2Client.frame(type: type, flags: flags, stream: stream, payload: [UInt8](repeating: 0xAA, count: payloadLength))
    }

    /// Every event, scanning `bytes` in pieces cut at `cut`.
    static func events(_ bytes: [UInt8], cutAt cut: Int, maxWindowUpdates: Int = 100) -> [HTTP2FrameScanner.Event] {
        var scanner = HTTP2FrameScanner(maxWindowUpdates: maxWindowUpdates, floodWindow: .seconds(30))
        let now = NIODeadline.uptimeNanoseconds(1)
        return scanner.scan(ByteBuffer(bytes: bytes[..<cut]), now: now) + scanner.scan(ByteBuffer(bytes: bytes[cut...]), now: now)
    }

    @Test("a header block split over HEADERS and CONTINUATION starts at its first frame and ends with END_HEADERS, wherever reads cut")
    func headerBlock() {
        let headers = Self.frame(type: 0x1, stream: 1, payloadLength: 20)
        let continuation = Self.frame(type: 0x9, flags: 0x4, stream: 1, payloadLength: 7)
        let bytes = Self.preface + headers + continuation
        for cut in 0...bytes.count {
            let events = Self.events(bytes, cutAt: cut)
            // Cut inside the block, past the first frame's 9-byte header: it starts in the first
            // read and ends in the second. Otherwise one read holds its start and its end.
            if cut >= Self.preface.count + 9 && cut < bytes.count {
                #expect(events == [.headerBlockStarted, .headerBlockEnded], "cut at \(cut)")
            } else {
                #expect(events == [.headerBlockEnded], "cut at \(cut)")  // whole in one read
            }
        }
    }

    @Test("a HEADERS frame without END_HEADERS leaves the block open; the last client stream is remembered")
    func openBlock() {
        var scanner = HTTP2FrameScanner(maxWindowUpdates: 100, floodWindow: .seconds(30))
        let bytes =
            Self.preface + Self.frame(type: 0x1, flags: 0x5, stream: 3, payloadLength: 4)
            + Self.frame(type: 0x1, stream: 5, payloadLength: 4)
        let events = scanner.scan(ByteBuffer(bytes: bytes), now: .uptimeNanoseconds(1))
        #expect(events == [.headerBlockEnded, .headerBlockStarted] || events == [.headerBlockStarted])
        #expect(scanner.inHeaderBlock)
        #expect(scanner.lastClientStream == 5)
    }

    @Test("WINDOW_UPDATE frames past the limit within the window are a flood; the count restarts with the next window")
    func windowUpdates() {
        var scanner = HTTP2FrameScanner(maxWindowUpdates: 3, floodWindow: .seconds(1))
        let update = Self.frame(type: 0x8, stream: 0, payloadLength: 4)
        #expect(scanner.scan(ByteBuffer(bytes: Self.preface + update + update + update), now: .uptimeNanoseconds(0)) == [])
        #expect(scanner.scan(ByteBuffer(bytes: update), now: .uptimeNanoseconds(500_000_000)) == [.windowUpdateFlood])
        #expect(scanner.scan(ByteBuffer(bytes: update), now: .uptimeNanoseconds(2_000_000_000)) == [])
    }
}
