import FuzzGateway
import NIOCore

/// libFuzzer's entry point: the input is what an HTTP/2 client sends after the connection preface
/// (frames, well formed or not: HEADERS with HPACK blocks, CONTINUATION, DATA, RST_STREAM,
/// SETTINGS, WINDOW_UPDATE, GOAWAY…). It goes through the gateway's real HTTP/2 pipeline (the
/// connection guard, NIO's HTTP/2 handler with the policy's limits, the stream admission, each
/// stream's codec, timeouts and `GatewayHandler`) on an `EmbeddedChannel`, with the backend double
/// of the HTTP/1.1 target. Nothing may crash or trip ASan, and the gateway's output must be whole
/// HTTP/2 frames, starting with its SETTINGS.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Connection(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    var input = GatewayHarness.preface
    input.writeBytes(UnsafeRawBufferPointer(start: data, count: size))
    GatewayHarness.checkFrames(GatewayHarness.shared.exchange(input, http2: true))
    return 0
}
