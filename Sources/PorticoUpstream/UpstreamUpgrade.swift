import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import PorticoTLS

/// A request that asks the backend to switch protocols (a WebSocket handshake), sent over a
/// connection of its own, never a pooled one: if the backend switches, the connection is no longer
/// HTTP and belongs to the caller from then on.
///
/// The connection is opened on the caller's event loop (the client connection's), so the relay
/// that joins the two later runs on one thread. `http://` and `https://` targets are both reached
/// here, through NIO, with the gateway's OpenSSL client handler for TLS: libcurl, which carries the
/// gateway's other `https` requests, hands over no connection to relay bytes on.
public enum UpstreamUpgrade {
    /// How the backend answered.
    public enum Outcome: Sendable {
        /// It switched (`101`): its head, and the connection with its HTTP handlers gone. What the
        /// backend sent after its head waits in the channel's ``UpgradedBytesBuffer`` (its last
        /// handler) until the caller's own handlers are in place.
        case switched(UpstreamResponseHead, any Channel)
        /// It did not: its whole answer (the body at most ``maximumAnswerBytes`` long); the
        /// connection is closed.
        case answered(UpstreamResponseHead, ByteBuffer?)
    }

    /// The longest body of an answer other than `101` the gateway relays (a refusal's problem, an
    /// error page); a longer one fails the exchange.
    public static let maximumAnswerBytes = 1 << 20

    /// Sends `request` (its head only: an upgrade request has no body) to its URL's host and waits
    /// up to `request.timeout` for the answer's head. `serverName` is the name a TLS target's
    /// certificate must hold (its URL may hold the address the name resolved to).
    public static func open(
        _ request: UpstreamRequest, serverName: String?, tls: TLSContexts, on eventLoop: any EventLoop
    ) -> EventLoopFuture<Outcome> {
        let target: (origin: UpstreamOrigin, requestTarget: String, authority: Substring, secure: Bool)
        switch split(request.url) {
        case .success(let parsed): target = parsed
        case .failure(let error): return eventLoop.makeFailedFuture(error)
        }
        let tlsContext: TLSClientContext?
        do {
            tlsContext = target.secure ? try tls.context(caFile: request.trustedCAFile) : nil
        } catch {
            return eventLoop.makeFailedFuture(UpstreamError(.connectFailed, detail: "TLS set-up: \(error)"))
        }
        // An upgrade's head goes through NIO's encoder: the fields as NIO's type, once per upgrade.
        guard request.headers.isSendable else { return eventLoop.makeFailedFuture(UpstreamError.unsendableRequest) }
        var headers = request.headers.httpHeaders
        if !headers.contains(name: "host") { headers.replaceOrAdd(name: "Host", value: String(target.authority)) }
        headers.remove(name: "content-length")
        headers.remove(name: "transfer-encoding")
        let head = HTTPRequestHead(
            version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: target.requestTarget, headers: headers)
        guard head.isSendable else {
            return eventLoop.makeFailedFuture(UpstreamError.unsendableRequest)
        }
        let promise = eventLoop.makePromise(of: Outcome.self)
        guard let bootstrap = ClientBootstrap(validatingGroup: eventLoop) else {
            return eventLoop.makeFailedFuture(UpstreamError(.invalidRequest, detail: "an upgrade needs a NIOPosix event loop"))
        }
        let origin = target.origin
        let name = serverName ?? origin.host
        let timeout = TimeAmount(request.timeout)
        bootstrap
            .connectTimeout(TimeAmount(request.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tlsContext { try pipeline.addHandler(TLSClientHandler(context: tlsContext, serverName: name)) }
                    try pipeline.addHandler(InactiveHold())
                    try pipeline.addHandler(HTTPRequestEncoder())
                    try pipeline.addHandler(ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes)))
                    try pipeline.addHandler(UpgradeAnswerHandler(head: head, timeout: timeout, origin: origin, promise: promise))
                }
            }
            .connect(host: origin.host, port: origin.port)
            .whenFailure { error in
                let timedOut = (error as? ChannelError).map { if case .connectTimeout = $0 { true } else { false } } ?? false
                promise.fail(UpstreamError(timedOut ? .timedOut : .connectFailed, detail: "connect to \(origin): \(error)"))
            }
        return promise.futureResult
    }

    /// `http://` or `https://`, host, port (the scheme's default when absent) and request target.
    static func split(_ url: String) -> Result<(UpstreamOrigin, String, Substring, Bool), UpstreamError> {
        let secure = url.utf8.count > 8 && url.prefix(8).lowercased() == "https://"
        let plain = secure ? "http://" + url.dropFirst(8) : url
        switch UpstreamOrigin.parse(plain) {
        case .success(var parsed):
            if secure, !hasPort(parsed.authority) { parsed.origin.port = 443 }
            return .success((parsed.origin, parsed.requestTarget, parsed.authority, secure))
        case .failure(let error):
            return .failure(error)
        }
    }

    private static func hasPort(_ authority: Substring) -> Bool {
        if authority.hasPrefix("[") { return authority.contains("]:") }
        return authority.contains(":")
    }

    /// The TLS client contexts upgrades use, one per CA file, made when first needed.
    public final class TLSContexts: Sendable {
        private let contexts = NIOLockedValueBox<[String: TLSClientContext]>([:])

        public init() {}

        func context(caFile: String?) throws -> TLSClientContext {
            try contexts.withLockedValue { contexts in
                if let context = contexts[caFile ?? ""] { return context }
                let context = try TLSClientContext(caFile: caFile)
                contexts[caFile ?? ""] = context
                return context
            }
        }
    }
}

/// Sends the upgrade request once connected and reads the answer: a `101` hands the connection
/// over (the HTTP handlers leave, this one too); anything else is read whole and the connection
/// closed. Confined to its channel's event loop.
final class UpgradeAnswerHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let head: HTTPRequestHead
    private let timeout: TimeAmount
    private let origin: UpstreamOrigin
    private var promise: EventLoopPromise<UpstreamUpgrade.Outcome>?
    private var answer: UpstreamResponseHead?
    private var body: ByteBuffer?
    private var timer: Scheduled<Void>?

    init(head: HTTPRequestHead, timeout: TimeAmount, origin: UpstreamOrigin, promise: EventLoopPromise<UpstreamUpgrade.Outcome>) {
        self.head = head
        self.timeout = timeout
        self.origin = origin
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        let channel = context.channel
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            fail(UpstreamError(.timedOut, detail: "no answer to the upgrade from \(origin) within \(timeout)"), channel: channel)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // The answer's head goes to the client as it is (decorated): checked here, since the
            // client's pipeline has no validating handler (``HTTPHeaders/areSendable``).
            guard head.headers.areSendable else { return fail(ResponseFraming.unsendableHead, channel: context.channel) }
            var headers = head.headers
            let length = headers.first(name: "content-length").flatMap(Int.init)
            if head.status == .switchingProtocols {
                headers.remove(name: "content-length")
                (try? context.pipeline.syncOperations.handler(type: InactiveHold.self))?.holding = true
            }
            answer = UpstreamResponseHead(status: Int(head.status.code), headers: headers, contentLength: length)
        case .body(var part):
            if (body?.readableBytes ?? 0) + part.readableBytes > UpstreamUpgrade.maximumAnswerBytes {
                return fail(
                    UpstreamError(.badResponse, detail: "an answer to the upgrade longer than \(UpstreamUpgrade.maximumAnswerBytes) bytes"),
                    channel: context.channel)
            }
            if body == nil { body = part } else { body!.writeBuffer(&part) }
        case .end:
            guard let answer, let promise else { return }
            self.promise = nil
            timer?.cancel()
            guard answer.status == 101 else {
                var whole = answer
                whole.contentLength = body?.readableBytes ?? 0
                promise.succeed(.answered(whole, body))
                return context.close(promise: nil)
            }
            // What the backend sent after its head is forwarded by the decoder as it leaves:
            // the buffer is there first to keep it.
            // The decoder is mid-read here, so it leaves once this read is done: the answer is
            // handed over only then, when its bytes are in the buffer.
            let channel = context.channel
            let decoderRemoved: EventLoopFuture<Void>
            do {
                let pipeline = context.pipeline.syncOperations
                try pipeline.addHandler(UpgradedBytesBuffer(), position: .after(self))
                pipeline.removeHandler(context: context, promise: nil)
                try pipeline.removeHandler(context: pipeline.context(handlerType: HTTPRequestEncoder.self), promise: nil)
                decoderRemoved = pipeline.removeHandler(
                    context: try pipeline.context(handlerType: ByteToMessageHandler<HTTPResponseDecoder>.self))
            } catch {
                promise.fail(UpstreamError(.badResponse, detail: "switching protocols: \(error)"))
                return context.close(promise: nil)
            }
            decoderRemoved.whenComplete { result in
                // The backend's close, if it came with its 101, reaches the handlers now.
                if let hold = try? channel.pipeline.syncOperations.context(handlerType: InactiveHold.self) {
                    channel.pipeline.syncOperations.removeHandler(context: hold, promise: nil)
                }
                switch result {
                case .success: promise.succeed(.switched(answer, channel))
                case .failure(let error):
                    promise.fail(UpstreamError(.badResponse, detail: "switching protocols: \(error)"))
                    channel.close(promise: nil)
                }
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(UpstreamError(.badResponse, detail: "answer to the upgrade from \(origin): \(error)"), channel: context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(UpstreamError(.badResponse, detail: "\(origin) closed the connection before answering the upgrade"), channel: context.channel)
        context.fireChannelInactive()
    }

    private func fail(_ error: UpstreamError, channel: any Channel) {
        timer?.cancel()
        guard let promise else { return }
        self.promise = nil
        promise.fail(error)
        channel.close(promise: nil)
    }
}

/// Keeps what an upgraded connection receives until the handler that relays it is in place, and
/// reads no more meanwhile. Its removal hands the kept bytes on, in order.
public final class UpgradedBytesBuffer: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer

    private var held: [ByteBuffer] = []
    private var inputClosed = false

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        held.append(unwrapInboundIn(data))
    }

    public func channelReadComplete(context: ChannelHandlerContext) {}

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event { inputClosed = true } else { context.fireUserInboundEventTriggered(event) }
    }

    /// No reads until the relay is there: what it cannot pass on yet stays in the socket.
    public func read(context: ChannelHandlerContext) {}

    public func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        let held = self.held
        self.held = []
        for buffer in held { context.fireChannelRead(wrapInboundOut(buffer)) }
        if !held.isEmpty { context.fireChannelReadComplete() }
        if inputClosed { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        // A read asked for meanwhile was held back here: the relay asks again as it sees fit.
        context.leavePipeline(removalToken: removalToken)
    }
}

/// Holds back the connection's close while a `101`'s switch is under way. A backend that sends its
/// `101`, a frame and its FIN in one go would otherwise have NIO's decoder see the end of input
/// before it leaves, and a decoder that has seen it drops what it still holds (the frame) instead
/// of handing it on. Removed, it passes the close on.
final class InactiveHold: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Set once a `101` head has been read: only then is the close held back (an answer of
    /// another kind may be delimited by it).
    var holding = false
    private var inactive = false

    func channelInactive(context: ChannelHandlerContext) {
        guard holding else { return context.fireChannelInactive() }
        inactive = true
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        if inactive { context.fireChannelInactive() }
        context.leavePipeline(removalToken: removalToken)
    }
}
