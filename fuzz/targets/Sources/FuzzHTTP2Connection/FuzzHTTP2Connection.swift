import FuzzGateway
import NIOCore
import NIOEmbedded

/// libFuzzer's entry point: the input is what an HTTP/2 client sends after the connection preface
/// (frames, well formed or not: HEADERS with HPACK blocks, CONTINUATION, DATA, RST_STREAM,
/// SETTINGS, WINDOW_UPDATE, GOAWAY…). It goes through the gateway's real HTTP/2 pipeline (the
/// connection guard, NIO's HTTP/2 handler with the policy's limits, the stream admission, each
/// stream's codec, timeouts and `GatewayHandler`) on an `EmbeddedChannel`, with the backend double
/// of the HTTP/1.1 target. Nothing may crash or trip ASan, and the gateway's output must be whole
/// HTTP/2 frames, starting with its SETTINGS.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Connection(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let harness = GatewayHarness.shared
    let channel = EmbeddedChannel()
    do {
        try harness.configure(channel, http2: true)
    } catch {
        preconditionFailure("the gateway's HTTP/2 pipeline cannot be built: \(error)")
    }
    var output = channel.allocator.buffer(capacity: 512)
    var input = GatewayHarness.preface
    input.writeBytes(UnsafeRawBufferPointer(start: data, count: size))
    // Errors reaching the end of the pipeline are the handlers' business (they close the channel).
    _ = try? channel.writeInbound(input)
    for _ in 0..<64 where channel.isActive {
        channel.embeddedEventLoop.run()
        if !GatewayHarness.drainOutbound(channel, into: &output) { break }
    }
    _ = try? channel.finish(acceptAlreadyClosed: true)
    _ = GatewayHarness.drainOutbound(channel, into: &output)
    GatewayHarness.checkFrames(output)
    return 0
}
