import Logging
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoSigning
import PorticoTLS
import PorticoUpstream

/// What every connection's handler shares: the policy, the upstream client, the access log.
struct GatewayServices: Sendable {
    let store: PolicyStore
    let upstream: any UpstreamClient
    /// Nonces of accepted signatures; outlives policy reloads.
    let nonces: any NonceStore
    /// Rate-limit buckets and backend concurrency; outlive policy reloads.
    let rateLimiter: RateLimiter
    let accessLogger: Logger
    let scheme: String
}

/// Carries one request through the stages (route → authenticate → rate-limit → handler) and its response back to the client.
///
/// One per connection; requests arrive one at a time (NIO's pipelining handler holds back the next
/// one until this response has ended), so the handler is always in exactly one ``Phase``.
final class GatewayHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    enum Phase {
        /// Waiting for a request head.
        case idle
        /// A proxied request's body is being collected (bodies are forwarded whole).
        case receivingBody
        /// Answered before the request ended (an error); the rest of a small body is read and
        /// dropped so the connection can serve the next request (see ``maxDrainBytes``).
        case discardingBody
        /// Sent upstream; the response is awaited or streaming.
        case forwarding
        case closed
    }

    /// The request in progress. A class, so that the handler updates it in place rather than
    /// copying a dozen fields (and their reference counts) at every event.
    final class Exchange {
        let serial: Int
        let head: HTTPRequestHead
        let requestID: String
        let snapshot: PolicySnapshot
        var keepAlive: Bool
        /// The body length the head announced (`nil`: none announced, or chunked).
        var declaredLength: Int?
        /// Whether a body follows the head (announced length over zero, or chunked).
        var expectsBody = false
        /// An HTTP/1.1 client sent `Expect: 100-continue` and has not been told to go on: it may
        /// never send its body, so a request answered early cannot be drained.
        var awaitingContinue = false
        /// Body bytes read and dropped after an early answer.
        var drainedBytes = 0
        var record: AccessRecord
        var routed: RoutedRequest?
        var proxy: ProxyPolicy?
        var backend: CompiledBackend?
        var body: ByteBuffer?
        /// The `Content-Digest` a signed request's body must match before it is forwarded.
        var contentDigest: String?
        /// The header carrying an API key, which is not forwarded (it holds the secret).
        var credentialHeader: String?
        var task: (any UpstreamTask)?
        var responseStarted = false
        /// The most restrictive rate limit that admitted the request, reported in the response.
        var rateLimit: AppliedLimit?
        /// The backend concurrency slot this exchange holds while forwarding.
        var concurrencySlot: BackendConcurrency.Counter?

        /// Gives the backend slot back, once, whichever way the exchange ended.
        func releaseConcurrencySlot() {
            concurrencySlot?.release()
            concurrencySlot = nil
        }

        init(serial: Int, head: HTTPRequestHead, requestID: String, snapshot: PolicySnapshot, keepAlive: Bool, record: AccessRecord) {
            self.serial = serial
            self.head = head
            self.requestID = requestID
            self.snapshot = snapshot
            self.keepAlive = keepAlive
            self.record = record
        }
    }

    /// The most of an unread body the gateway reads and throws away after answering early, so that
    /// the connection can carry the next request. A longer body (or one whose client waits for
    /// `100 Continue`) is not read at all: the answer says `Connection: close` and the connection
    /// closes, which costs the client a new connection rather than the gateway an unbounded read.
    static let maxDrainBytes = 64 * 1024

    private let services: GatewayServices
    /// The same connection's timeout handler, told where each request stands.
    private let timeouts: ConnectionTimeoutHandler
    private var phase = Phase.idle
    private var exchange: Exchange?
    private var serial = 0
    private var clientAddress: String?
    /// What the per-address rate limit counts this client as (its /64 for IPv6).
    private var addressSubject: String?
    /// What the TLS handshake established (nil on a plain-HTTP listener), including the verified
    /// client certificate's subject for later stages and the access log.
    private var tls: TLSConnectionInfo?

    init(services: GatewayServices, timeouts: ConnectionTimeoutHandler) {
        self.services = services
        self.timeouts = timeouts
    }

    func handlerAdded(context: ChannelHandlerContext) {
        clientAddress = context.channel.remoteAddress?.ipAddress
        addressSubject = ClientAddress.rateLimitSubject(context.channel.remoteAddress)
    }

    // MARK: Inbound

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let completed = event as? TLSHandshakeCompleted {
            tls = completed.info
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): receivedHead(head, context: context)
        case .body(let part): receivedBody(part, context: context)
        case .end: receivedEnd(context: context)
        }
    }

    private func receivedHead(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        guard case .idle = phase else { return }
        serial += 1
        let active = services.store.current
        let snapshot = active.snapshot
        let limits = snapshot.limits
        let requestID = head.headers.first(name: "x-request-id").flatMap { RequestID.accept($0) ? $0 : nil } ?? RequestID.generate()
        let path = head.uri.firstIndex(of: "?").map { head.uri[..<$0] } ?? head.uri[...]
        var record = AccessRecord(requestID: requestID, method: head.method.rawValue, path: path, client: clientAddress, started: .now())
        record.tlsVersion = tls?.version
        record.clientCertificate = tls?.peerSubject
        exchange = Exchange(
            serial: serial, head: head, requestID: requestID, snapshot: snapshot, keepAlive: head.isKeepAlive, record: record)

        let contentLength = head.headers.first(name: "content-length").flatMap(Int.init)
        let expectsBody = (contentLength ?? 0) > 0 || head.headers.contains(name: "transfer-encoding")
        exchange!.declaredLength = contentLength
        exchange!.expectsBody = expectsBody
        // RFC 9110 §10.1.1: an HTTP/1.0 client's expectation is ignored (it cannot know `100`).
        let expectation = head.version == .http1_1 ? head.headers.first(name: "expect") : nil
        exchange!.awaitingContinue = expectation.map { HeaderName.matches($0, "100-continue") } ?? false
        timeouts.requestHeadReceived(expectsBody: expectsBody)

        if let problem = Self.checkHost(head) {
            return answerEarly(problem, context: context)
        }
        if let contentLength, contentLength > limits.maxBodyBytes {
            return answerEarly(.bodyTooLarge(limit: limits.maxBodyBytes), context: context)
        }
        let routed: RoutedRequest
        switch Route.resolve(head, in: active) {
        case .failure(let problem): return answerEarly(problem, context: context)
        case .success(let value): routed = value
        }
        exchange!.record.service = routed.service.name
        exchange!.record.version = routed.version
        exchange!.routed = routed

        var tierName: String?
        var nonce: PendingNonce?
        if routed.service.policy.auth != .none {
            let authenticator = RequestAuthenticator(active, nonces: services.nonces, scheme: services.scheme)
            switch authenticator.authenticate(head, service: routed.service.policy, hasBody: expectsBody, now: RequestAuthenticator.now()) {
            case .failure(let problem): return answerEarly(problem, context: context)
            case .success(let authentication):
                exchange!.record.keyID = authentication.keyID
                exchange!.contentDigest = authentication.contentDigest
                tierName = authentication.tier
                nonce = authentication.nonce
                if routed.service.policy.auth == .apiKey { exchange!.credentialHeader = active.apiKeyHeader }
            }
        }
        switch routed.handler {
        case .proxy(let proxy):
            exchange!.proxy = proxy
            exchange!.backend = routed.backend
            exchange!.record.backend = proxy.backend
        }
        let keyID = exchange!.record.keyID
        switch services.rateLimiter.admit(
            service: routed.rules, tier: tierName, keyID: keyID, clientAddress: addressSubject, backend: exchange!.backend)
        {
        case .failure(let problem): return answerEarly(problem, context: context)
        case .success(let applied): exchange!.rateLimit = applied
        }
        // Only now, with the key's own limit passed, does its nonce take room in the shared store.
        if let nonce, let problem = nonce.record(in: services.nonces, now: RequestAuthenticator.now()) {
            return answerEarly(problem, context: context)
        }
        // RFC 9110 §10.1.1: a client waiting on `Expect: 100-continue` sends its body only when told,
        // and is told only once the request has passed every check that needs no body.
        if let expectation {
            guard exchange!.awaitingContinue else {
                return answerEarly(.expectationFailed(expectation), context: context)
            }
            exchange!.awaitingContinue = false
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
        }
        phase = .receivingBody
    }

    /// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one `Host` field, an HTTP/1.0 one at most
    /// one; its value is a URI authority (RFC 3986 §3.2.2), possibly empty.
    static func checkHost(_ head: HTTPRequestHead) -> Problem? {
        var count = 0
        var value = ""
        for (name, fieldValue) in head.headers where HeaderName.matches(name, "host") {
            count += 1
            value = fieldValue
        }
        if count > 1 { return .badRequest("The request has \(count) Host fields; send exactly one.") }
        if count == 0 && head.version == .http1_1 { return .badRequest("An HTTP/1.1 request must carry a Host field.") }
        let allowed = value.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default:
                "-._~!$&'()*+,;=:[]%".utf8.contains(byte)
            }
        }
        return allowed ? nil : .badRequest("The Host field is not a valid authority (a host name or address and an optional port).")
    }

    private func receivedBody(_ part: ByteBuffer, context: ChannelHandlerContext) {
        if case .discardingBody = phase, let exchange {
            exchange.drainedBytes += part.readableBytes
            // A chunked body announces no length: stop reading once it is clearly not small.
            if exchange.drainedBytes > Self.maxDrainBytes {
                phase = .closed
                self.exchange = nil
                context.close(promise: nil)
            }
            return
        }
        guard case .receivingBody = phase else { return }
        let limit = exchange!.snapshot.limits.maxBodyBytes
        let received = exchange!.body?.readableBytes ?? 0
        if received + part.readableBytes > limit {
            return answerEarly(.bodyTooLarge(limit: limit), context: context)
        }
        if exchange!.body == nil {
            exchange!.body = part
        } else {
            var part = part
            exchange!.body!.writeBuffer(&part)
        }
    }

    private func receivedEnd(context: ChannelHandlerContext) {
        switch phase {
        case .receivingBody:
            timeouts.requestEndReceived()
            if let digest = exchange!.contentDigest, !Self.bodyMatches(digest, body: exchange!.body) {
                writeProblem(.contentDigestMismatch(), context: context)
                return endResponse(requestEnded: true, closing: false, context: context)
            }
            forward(context: context)
        case .discardingBody:
            timeouts.requestEndReceived()
            timeouts.responseEndSent()
            phase = .idle
            exchange = nil
        case .idle, .forwarding, .closed:
            break
        }
    }

    /// Whether the whole body matches the signed `Content-Digest` (an unparseable one does not).
    private static func bodyMatches(_ digest: String, body: ByteBuffer?) -> Bool {
        let check = { (bytes: UnsafeRawBufferPointer) in (try? ContentDigest.verify(digest, body: bytes, using: OpenSSLDigest())) == true }
        guard let body else { return check(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return body.withUnsafeReadableBytes(check)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .forwarding = phase, let exchange {
            exchange.task?.cancel()
            exchange.releaseConcurrencySlot()
            exchange.record.failure = "client closed the connection"
            exchange.record.status = exchange.responseStarted ? exchange.record.status : 499
            log(exchange.record, snapshot: exchange.snapshot)
        }
        phase = .closed
        exchange = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Parser errors were answered by HTTPParserErrorHandler; anything else ends the connection.
        context.close(promise: nil)
    }

    // MARK: Forwarding

    private func forward(context: ChannelHandlerContext) {
        guard let exchange, let routed = exchange.routed, let proxy = exchange.proxy, let backend = exchange.backend else {
            // A validated snapshot always has the backend its routes name; answer rather than hang.
            writeProblem(.badGateway(backend: self.exchange?.proxy?.backend ?? "unknown"), context: context)
            return endResponse(requestEnded: true, closing: false, context: context)
        }
        if let limit = backend.maxConcurrent {
            guard let slot = services.rateLimiter.concurrency.acquire(backend.name, max: limit) else {
                writeProblem(.backendBusy(backend: backend.name, limit: limit), context: context)
                return endResponse(requestEnded: true, closing: false, context: context)
            }
            exchange.concurrencySlot = slot
        }
        let request = ProxyForwarding.upstreamRequest(
            head: exchange.head, body: exchange.body, routed: routed, proxy: proxy, backend: backend,
            clientAddress: clientAddress, scheme: services.scheme, requestID: exchange.requestID, dropping: exchange.credentialHeader)
        phase = .forwarding
        exchange.body = nil
        let callback = UpstreamCallback(handler: self, context: context, serial: exchange.serial)
        exchange.task = services.upstream.execute(request, eventLoop: context.eventLoop, handler: callback)
    }

    /// Upstream events for the exchange `serial`; stale ones (a cancelled exchange) are dropped.
    fileprivate func upstreamReceived(_ events: UpstreamEvents, serial: Int, context: ChannelHandlerContext) {
        guard case .forwarding = phase, let exchange, exchange.serial == serial else { return }
        if let head = events.head {
            var keepAlive = exchange.keepAlive
            if exchange.head.version == .http1_0 && head.contentLength == nil {
                keepAlive = false  // an HTTP/1.0 client can only see the end of such a body as a close
            }
            exchange.keepAlive = keepAlive
            var responseHead = ProxyForwarding.responseHead(
                head, version: exchange.head.version, requestID: exchange.requestID, apiVersion: exchange.routed!.version,
                keepAlive: keepAlive)
            if let limit = exchange.rateLimit {
                responseHead.headers.add(name: "ratelimit-policy", value: limit.policyField)
                responseHead.headers.add(name: "ratelimit", value: limit.statusField)
            }
            exchange.record.status = responseHead.status.code
            exchange.responseStarted = true
            context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        }
        if let body = events.body {
            let count = body.readableBytes
            exchange.record.bytesSent += count
            if events.result == nil, let task = exchange.task {
                let promise = context.eventLoop.makePromise(of: Void.self)
                promise.futureResult.whenComplete { _ in task.consumed(bytes: count) }
                context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: promise)
            } else {
                context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            }
        }
        if events.result != nil { exchange.releaseConcurrencySlot() }
        switch events.result {
        case nil:
            context.flush()
        case .success(let metrics):
            exchange.record.upstreamDuration = metrics.duration
            exchange.record.upstreamConnects = metrics.newConnections
            endResponse(requestEnded: true, closing: false, context: context)
        case .failure(let error):
            exchange.record.failure = error.description
            if exchange.responseStarted {
                // The status is gone; a truncated body can only be signalled by closing.
                context.flush()
                log(exchange.record, snapshot: exchange.snapshot)
                phase = .closed
                context.close(promise: nil)
            } else {
                let backend = exchange.proxy?.backend ?? "unknown"
                let problem: Problem = error.kind == .timedOut ? .gatewayTimeout(backend: backend) : .badGateway(backend: backend)
                writeProblem(problem, context: context)
                endResponse(requestEnded: true, closing: problem.closesConnection, context: context)
            }
        }
    }

    // MARK: Answers

    /// Answers with a problem while the request's body may still be arriving.
    ///
    /// The connection stays open only if what is left of the body is small enough to read and drop
    /// (``maxDrainBytes``) and the client is not waiting for `100 Continue`; the rest must arrive
    /// within the head timeout, counted from now and not extended by each byte.
    private func answerEarly(_ problem: Problem, context: ChannelHandlerContext) {
        let exchange = self.exchange!
        let drainable =
            !exchange.expectsBody || (!exchange.awaitingContinue && (exchange.declaredLength ?? 0) <= Self.maxDrainBytes)
        let closing = problem.closesConnection || !drainable
        writeProblem(problem, closing: closing, context: context)
        endResponse(requestEnded: false, closing: closing, context: context)
        if !closing && exchange.expectsBody { timeouts.drainStarted() }
    }

    /// Writes a problem response's head and body; ``endResponse`` writes its end.
    private func writeProblem(_ problem: Problem, closing: Bool = false, context: ChannelHandlerContext) {
        let exchange = self.exchange!
        let body = problem.body(requestID: exchange.requestID)
        var head = problem.head(requestID: exchange.requestID, contentLength: body.readableBytes, version: exchange.head.version)
        if (closing || !exchange.keepAlive) && !problem.closesConnection { head.headers.add(name: "connection", value: "close") }
        exchange.record.status = problem.status.code
        exchange.record.bytesSent = body.readableBytes
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
    }

    /// Logs the exchange, moves to the next phase, then writes the response's end.
    ///
    /// The order matters: writing `.end` lets NIO's pipelining handler hand over the next buffered
    /// request at once, re-entrantly, so this handler must already be ready for it.
    private func endResponse(requestEnded: Bool, closing: Bool, context: ChannelHandlerContext) {
        guard let exchange else { return }
        log(exchange.record, snapshot: exchange.snapshot)
        let closes = closing || !exchange.keepAlive
        if closes {
            phase = .closed
            self.exchange = nil
        } else if requestEnded {
            phase = .idle
            self.exchange = nil
            timeouts.responseEndSent()
        } else {
            phase = .discardingBody
        }
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if closes {
            // Close once the answer has left: closing now would discard a response still queued.
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    private func log(_ record: AccessRecord, snapshot: PolicySnapshot) {
        if snapshot.policy.accessLog.enabled { record.write(to: services.accessLogger) }
    }
}

/// Routes one exchange's upstream events back to the connection's handler. A separate object per
/// exchange, tagged with its serial number, so events of a cancelled exchange cannot reach the next.
private final class UpstreamCallback: UpstreamResponseHandler {
    private let handler: GatewayHandler
    private let context: ChannelHandlerContext
    private let serial: Int

    init(handler: GatewayHandler, context: ChannelHandlerContext, serial: Int) {
        self.handler = handler
        self.context = context
        self.serial = serial
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        handler.upstreamReceived(events, serial: serial, context: context)
    }
}
