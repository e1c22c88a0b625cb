import Dispatch

/// Where issuers' key sets are fetched and imported: a serial queue of its own, not Swift's
/// cooperative pool. JWTKit's key collection is an actor, so the import is `async`; run on the
/// shared pool it would wait behind whatever else occupies those few threads (on a 2-core machine,
/// two), and requests waiting for a key set would wait with it. On its own queue (a task executor
/// preference, which default actors follow too) it never does.
final class KeyImportExecutor: TaskExecutor {
    static let shared = KeyImportExecutor()

    private let queue = DispatchQueue(label: "portico.jwt-keys")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
