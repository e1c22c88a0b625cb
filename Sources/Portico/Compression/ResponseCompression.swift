import Logging
import NIOCore
import NIOHTTP1
import PorticoPolicy
import PorticoUpstream

/// Compresses a handler's response on its way to the connection's handler, when the client's
/// `Accept-Encoding` and the response allow it (``CompressionRules/mayCompress(status:headers:contentLength:)``):
/// each delivery is compressed and flushed as it comes, so memory is the encoder's state and one
/// delivery, never the whole body. Every response that could have been compressed says `Vary:
/// Accept-Encoding`, compressed or not.
///
/// The backend is owed credit for the bytes it sent, not for the fewer this writes: the
/// difference is returned at once, so the window stays as the backend sees it.
/// Confined to the connection's event loop.
final class ResponseCompression: ExchangeResponder {
    private let inner: any ExchangeResponder
    private let rules: CompressionRules
    /// What the client accepts best; nil when it accepts none of the policy's codings.
    private let coding: ContentCoding?
    private var encoder: (any StreamEncoder)?
    private var headSeen = false

    init(inner: any ExchangeResponder, rules: CompressionRules, coding: ContentCoding?) {
        self.inner = inner
        self.rules = rules
        self.coding = coding
    }

    func handlerReceived(_ events: UpstreamEvents, for exchange: Exchange) {
        var events = events
        if var head = events.head, !headSeen {
            headSeen = true
            // The fields as pairs once (the head keeps them as lines), and as lines again once changed.
            if exchange.head.method != .HEAD, case var headers = head.headers,
                rules.mayCompress(status: head.status, headers: headers, contentLength: head.contentLength)
            {
                // A stored answer comes with it already (``CachedAnswer``).
                if !headers[canonicalForm: "vary"].contains(where: { $0.lowercased() == "accept-encoding" }) {
                    headers.add(name: "Vary", value: "Accept-Encoding")
                }
                if let coding, let encoder = try? StreamEncoders.make(coding, level: rules.level(coding)) {
                    self.encoder = encoder
                    CompressionRules.compressedHead(&headers, coding: coding)
                    head.contentLength = nil
                }
                head.headers = headers
                events.head = head
            }
        }
        if let encoder {
            let finishing: Bool
            switch events.result {
            case .success: finishing = true
            case .failure: finishing = false
            case nil: finishing = false
            }
            if events.body != nil || finishing {
                let input = events.body ?? ByteBuffer()
                do {
                    let output = try encoder.encode(input, finishing: finishing)
                    // The backend's credit is for what it sent; what this saved is returned now.
                    if events.result == nil, input.readableBytes > output.readableBytes {
                        exchange.task?.consumed(bytes: input.readableBytes - output.readableBytes)
                    }
                    events.body = output.readableBytes > 0 ? output : nil
                } catch {
                    exchange.task?.cancel()
                    events.body = nil
                    events.result = .failure(UpstreamError(.badResponse, detail: "compressing the response failed: \(error)"))
                }
            }
            if events.result != nil { self.encoder = nil }
        }
        inner.handlerReceived(events, for: exchange)
    }

    func handlerAnswered(_ problem: Problem, for exchange: Exchange) {
        inner.handlerAnswered(problem, for: exchange)
    }
}
