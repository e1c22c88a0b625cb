import NIOCore
import NIOHPACK
import NIOHTTP2

/// What an HTTP/2 stream asked to tunnel with RFC 8441's extended CONNECT (`:method CONNECT` with
/// `:protocol websocket`): NIO's HTTP/2-to-HTTP/1 codec keeps the method but drops `:protocol`, so
/// ``ExtendedConnectReader`` notes it here, where the stream's ``GatewayHandler`` reads it with the
/// request's head. A note, not a header field: a client cannot forge it on an ordinary request.
/// Confined to the stream's event loop.
final class ExtendedConnect {
    /// The `:protocol` of the stream's request, when it was an extended CONNECT.
    fileprivate(set) var requestedProtocol: String?
}

/// Reads the `:protocol` of a stream's request HEADERS into its ``ExtendedConnect``, before NIO's
/// codec drops it; passes every frame on unchanged. The gateway offers extended CONNECT in its
/// SETTINGS (`SETTINGS_ENABLE_CONNECT_PROTOCOL`), so NIO admits the pseudo-header.
final class ExtendedConnectReader: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload

    private let note: ExtendedConnect
    private var sawHead = false

    init(note: ExtendedConnect) {
        self.note = note
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !sawHead, case .headers(let headers) = unwrapInboundIn(data) {
            sawHead = true
            if headers.headers.first(name: ":method") == "CONNECT" {
                note.requestedProtocol = headers.headers.first(name: ":protocol")
            }
        }
        context.fireChannelRead(data)
    }
}
