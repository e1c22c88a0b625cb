import NIOCore

@testable import PorticoUpstream

/// Collects one exchange's events; lives on its event loop.
final class Collector: UpstreamResponseHandler {
    var head: UpstreamResponseHead?
    /// Which delivery (counting from 1) carried the head.
    var headDelivery: Int?
    var bodyBytes = 0
    var body = ByteBuffer()
    var keepBody = true
    var result: Result<UpstreamMetrics, UpstreamError>?
    var deliveries = 0
    let done: EventLoopPromise<Void>
    /// Whether to return credit for delivered bytes at once (a fast client) or hold it (a stalled one).
    var consumesImmediately = true
    var task: (any UpstreamTask)?
    var unconsumed = 0

    init(eventLoop: any EventLoop) { done = eventLoop.makePromise() }

    func upstreamReceived(_ events: UpstreamEvents) {
        deliveries += 1
        if let head = events.head {
            self.head = head
            headDelivery = deliveries
        }
        if var part = events.body {
            bodyBytes += part.readableBytes
            if keepBody { body.writeBuffer(&part) }
            if events.result == nil {
                let count = events.body?.readableBytes ?? 0
                if consumesImmediately { task?.consumed(bytes: count) } else { unconsumed += count }
            }
        }
        if let result = events.result {
            self.result = result
            done.succeed()
        }
    }
}

/// What a finished exchange delivered, copied off its event loop.
struct Outcome: Sendable {
    var head: UpstreamResponseHead?
    var body: ByteBuffer
    var result: Result<UpstreamMetrics, UpstreamError>?
    var deliveries: Int
    var headDelivery: Int?

    /// The failure's kind, or nil when the exchange succeeded.
    var failureKind: UpstreamError.Kind? {
        if case .failure(let error) = result { return error.kind }
        return nil
    }

    var succeeded: Bool {
        if case .success = result { return true }
        return false
    }
}

/// Runs one exchange to its end on `loop` and returns what it delivered.
func exchange(_ client: CurlUpstreamClient, _ request: UpstreamRequest, on loop: any EventLoop) async throws -> Outcome {
    let collector = try await loop.submit {
        let collector = Collector(eventLoop: loop)
        collector.task = client.execute(request, eventLoop: loop, handler: collector)
        return NIOLoopBound(collector, eventLoop: loop)
    }.get()
    return try await loop.flatSubmit {
        collector.value.done.futureResult.map {
            let value = collector.value
            return Outcome(
                head: value.head, body: value.body, result: value.result, deliveries: value.deliveries,
                headDelivery: value.headDelivery)
        }
    }.get()
}
