import CPorticoCurl
import NIOCore
import Synchronization

/// The production ``UpstreamClient``: libcurl's multi interface on a few dedicated threads.
///
/// Each thread (a ``CurlWorker``) owns one multi handle and therefore one connection pool; requests
/// are spread over the workers round-robin. See `docs/upstream.md` for the design and its reasons.
public final class CurlUpstreamClient: UpstreamClient {
    public struct Configuration: Sendable {
        public var threads: Int
        public var maxConnectionsPerHost: Int
        public var maxIdleConnections: Int

        public init(threads: Int = 1, maxConnectionsPerHost: Int = 64, maxIdleConnections: Int = 256) {
            self.threads = threads
            self.maxConnectionsPerHost = maxConnectionsPerHost
            self.maxIdleConnections = maxIdleConnections
        }
    }

    private static let globalInit: Void = {
        let code = portico_curl_global_init()
        precondition(code == CURLE_OK, "curl_global_init failed: \(code)")
    }()

    private let workers: [CurlWorker]
    private let nextWorker = Atomic<Int>(0)
    private let nextID = Atomic<Int>(0)
    private let isShutDown = Atomic<Bool>(false)

    public init(configuration: Configuration = .init()) {
        _ = Self.globalInit
        workers = (0..<max(1, configuration.threads)).map { index in
            CurlWorker(
                name: "portico-curl-\(index)", maxConnectionsPerHost: configuration.maxConnectionsPerHost,
                maxIdleConnections: configuration.maxIdleConnections)
        }
    }

    public func execute(
        _ request: UpstreamRequest, eventLoop: any EventLoop, handler: any UpstreamResponseHandler
    ) -> any UpstreamTask {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let worker = workers[nextWorker.wrappingAdd(1, ordering: .relaxed).newValue % workers.count]
        let flow = FlowControl()
        let task = CurlTask(worker: worker, id: id, flow: flow)
        let bound = NIOLoopBound(handler, eventLoop: eventLoop)
        if !worker.submit(.start(request, id: id, eventLoop: eventLoop, handler: bound, flow: flow)) {
            eventLoop.execute {
                bound.value.upstreamReceived(
                    UpstreamEvents(result: .failure(UpstreamError(.shutdown, detail: "upstream client shut down"))))
            }
        }
        return task
    }

    public func shutdown() {
        guard !isShutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for worker in workers { worker.stop() }
    }
}

/// The caller's handle on one exchange.
struct CurlTask: UpstreamTask {
    let worker: CurlWorker
    let id: Int
    let flow: FlowControl

    func cancel() { worker.submit(.cancel(id: id)) }

    func consumed(bytes: Int) {
        if flow.release(bytes) { worker.submit(.resume(id: id)) }
    }
}
