import FuzzGateway
import NIOCore
import NIOEmbedded

/// libFuzzer's entry point: the input is what a client sends on one connection (request heads,
/// bodies, pipelined requests, garbage). It goes through the gateway's real connection pipeline on
/// an `EmbeddedChannel`, the backend answers through ``ImmediateUpstreamClient``, and the
/// connection is then closed. Nothing may crash or trip ASan, and every byte the gateway writes
/// must be part of an HTTP/1.x response.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGatewayHead(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let harness = GatewayHarness.shared
    let channel = EmbeddedChannel()
    do {
        try harness.configure(channel)
    } catch {
        preconditionFailure("the gateway's pipeline cannot be built: \(error)")
    }
    var output = channel.allocator.buffer(capacity: 512)
    let input = channel.allocator.buffer(bytes: UnsafeRawBufferPointer(start: data, count: size))
    // Errors reaching the end of the pipeline are the handlers' business (they close the channel).
    _ = try? channel.writeInbound(input)
    // The upstream double answers in tasks on the channel's event loop; each answer may let a
    // pipelined request through, which asks upstream again.
    for _ in 0..<64 where channel.isActive {
        channel.embeddedEventLoop.run()
        if !GatewayHarness.drainOutbound(channel, into: &output) { break }
    }
    _ = try? channel.finish(acceptAlreadyClosed: true)
    _ = GatewayHarness.drainOutbound(channel, into: &output)
    GatewayHarness.checkResponses(output)
    return 0
}
