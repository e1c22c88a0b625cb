import NIOCore
import NIOPosix

@testable import PorticoUpstream

/// Records one exchange's deliveries on its event loop, and notes any that arrive elsewhere or
/// after the result (both would be bugs).
final class ExchangeRecorder: UpstreamResponseHandler {
    let eventLoop: any EventLoop
    var head: UpstreamResponseHead?
    var body = ByteBuffer()
    var bodyBytes = 0
    var keepBody = true
    var result: Result<UpstreamMetrics, UpstreamError>?
    var deliveries = 0
    var offLoopDeliveries = 0
    var deliveriesAfterResult = 0
    /// Whether delivered bytes are consumed at once (a fast client) or held (a stalled one).
    var consumesImmediately = true
    var unconsumed = 0
    var task: (any UpstreamTask)?
    let done: EventLoopPromise<Void>

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        done = eventLoop.makePromise()
    }

    func upstreamReceived(_ events: UpstreamEvents) {
        if !eventLoop.inEventLoop { offLoopDeliveries += 1 }
        if result != nil { deliveriesAfterResult += 1 }
        deliveries += 1
        if let head = events.head { self.head = head }
        if var part = events.body {
            let count = part.readableBytes
            bodyBytes += count
            if keepBody { body.writeBuffer(&part) }
            if events.result == nil {
                if consumesImmediately { task?.consumed(bytes: count) } else { unconsumed += count }
            }
        }
        if let result = events.result, self.result == nil {
            self.result = result
            done.succeed()
        }
    }

    var outcome: ExchangeOutcome {
        ExchangeOutcome(
            head: head, body: body, result: result, deliveries: deliveries, offLoopDeliveries: offLoopDeliveries,
            deliveriesAfterResult: deliveriesAfterResult)
    }
}

/// What a finished exchange delivered, copied off its event loop.
struct ExchangeOutcome: Sendable {
    var head: UpstreamResponseHead?
    var body: ByteBuffer
    var result: Result<UpstreamMetrics, UpstreamError>?
    var deliveries: Int
    var offLoopDeliveries: Int
    var deliveriesAfterResult: Int

    var text: String { String(buffer: body) }
    var errorKind: UpstreamError.Kind? {
        if case .failure(let error) = result { return error.kind }
        return nil
    }
    var metrics: UpstreamMetrics? {
        if case .success(let metrics) = result { return metrics }
        return nil
    }
    var succeeded: Bool { metrics != nil }
}

enum Exchanges {
    /// Starts `request` on `loop` (from the loop, as the gateway does) and returns its recorder.
    static func start(
        _ client: any UpstreamClient, _ request: UpstreamRequest, on loop: any EventLoop,
        configure: @escaping @Sendable (ExchangeRecorder) -> Void = { _ in }
    ) async throws -> NIOLoopBound<ExchangeRecorder> {
        try await loop.submit {
            let recorder = ExchangeRecorder(eventLoop: loop)
            configure(recorder)
            recorder.task = client.execute(request, eventLoop: loop, handler: recorder)
            return NIOLoopBound(recorder, eventLoop: loop)
        }.get()
    }

    /// Waits for the exchange's result.
    static func finish(_ recorder: NIOLoopBound<ExchangeRecorder>, on loop: any EventLoop) async throws -> ExchangeOutcome {
        try await loop.flatSubmit { recorder.value.done.futureResult.map { recorder.value.outcome } }.get()
    }

    static func run(_ client: any UpstreamClient, _ request: UpstreamRequest, on loop: any EventLoop) async throws -> ExchangeOutcome {
        try await finish(try await start(client, request, on: loop), on: loop)
    }

    /// Polls `condition` every 10 ms until it holds, at most `attempts` times; returns whether it held.
    /// Tests use it to wait for something to happen, never to assume how long anything takes.
    @discardableResult
    static func eventually(attempts: Int = 1000, _ condition: () async throws -> Bool) async rethrows -> Bool {
        for _ in 0..<attempts {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return try await condition()
    }
}

/// A weak reference to pass between a test and an event loop; read it on the loop that owns the object.
final class WeakReference<Object: AnyObject>: @unchecked Sendable {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}
