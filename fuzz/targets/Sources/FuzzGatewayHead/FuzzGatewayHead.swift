import FuzzGateway
import NIOCore

/// libFuzzer's entry point: the input is what a client sends on one connection (request heads,
/// bodies, pipelined requests, garbage). It goes through the gateway's real connection pipeline on
/// an `EmbeddedChannel`, the backend answers through ``ImmediateUpstreamClient``, and the
/// connection is then closed. Nothing may crash or trip ASan, and every byte the gateway writes
/// must be part of an HTTP/1.x response, framed so that a client reads each whole
/// (``GatewayHarness/checkResponses(_:input:)``).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGatewayHead(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = ByteBuffer(bytes: UnsafeRawBufferPointer(start: data, count: size))
    let harness = GatewayHarness.shared
    harness.checkResponses(harness.exchange(input), input: input)
    return 0
}
