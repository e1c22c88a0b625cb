import Benchmark
import Dispatch
import Foundation
import Portico

/// What the rate-limit stage costs per check, alone and with every event loop checking at once.
///
/// One benchmark iteration is `threads × perThread` checks; divide its time by that to get the
/// cost of one check (the figure reported in docs/rate-limits.md).
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .peakMemoryResident], maxDuration: .seconds(3))

    let threads = ProcessInfo.processInfo.activeProcessorCount  // one event loop per core
    let perThread = 10_000
    let limit = GCRALimit(count: 1_000_000, periodNanos: 1_000_000_000, burst: 1_000)
    let clock: @Sendable () -> Int64 = { Int64(bitPattern: DispatchTime.now().uptimeNanoseconds) }

    Benchmark("1 thread × 10,000 checks, one bucket") { benchmark in
        let store = InMemoryRateLimitStore()
        let key = RateLimitKey(scope: .backend, name: "quotes")
        for _ in benchmark.scaledIterations {
            for _ in 0..<perThread { blackHole(store.acquire(key, limit: limit, now: clock())) }
        }
    }

    Benchmark("\(threads) threads × 10,000 checks, all on one backend bucket") { benchmark in
        let store = InMemoryRateLimitStore()
        let key = RateLimitKey(scope: .backend, name: "quotes")
        for _ in benchmark.scaledIterations {
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for _ in 0..<perThread { blackHole(store.acquire(key, limit: limit, now: clock())) }
            }
        }
    }

    Benchmark("\(threads) threads × 10,000 checks, 1,000 key buckets each (tier limits)") { benchmark in
        let store = InMemoryRateLimitStore()
        let keys = (0..<threads).map { thread in
            (0..<1000).map { RateLimitKey(scope: .tier, name: "standard", service: "stockQuote", subject: "app-\(thread)-\($0)") }
        }
        for _ in benchmark.scaledIterations {
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                let mine = keys[thread]
                for index in 0..<perThread { blackHole(store.acquire(mine[index % 1000], limit: limit, now: clock())) }
            }
        }
    }

    Benchmark("\(threads) threads × 10,000 checks, backend concurrency slot taken and given back") { benchmark in
        let concurrency = BackendConcurrency()
        for _ in benchmark.scaledIterations {
            DispatchQueue.concurrentPerform(iterations: threads) { _ in
                for _ in 0..<perThread { concurrency.acquire("quotes", max: 1_000_000)?.release() }
            }
        }
    }

    // Memory: 100,000 distinct client addresses, one request each, arriving at 10,000 a second
    // (a scan, or a botnet). With eviction the store holds what is live; the second benchmark keeps
    // every bucket live (a frozen clock) to show the cost per bucket.
    let addresses = (0..<100_000).map { "10.\($0 >> 16 & 255).\($0 >> 8 & 255).\($0 & 255)" }
    let perAddress = GCRALimit(count: 10, periodNanos: 1_000_000_000, burst: 20)
    Benchmark("100,000 addresses at 10,000/s: idle buckets swept", configuration: .init(maxIterations: 1)) { benchmark in
        let store = InMemoryRateLimitStore(capacity: 1_000_000)
        var now: Int64 = 0
        for address in addresses {
            blackHole(store.acquire(RateLimitKey(scope: .address, name: "echo", subject: address), limit: perAddress, now: now))
            now += 100_000
        }
        print("swept store holds \(store.count) buckets after 100,000 addresses")
    }
    Benchmark("100,000 addresses at one instant: every bucket live", configuration: .init(maxIterations: 1)) { benchmark in
        let store = InMemoryRateLimitStore(capacity: 1_000_000)
        for address in addresses {
            blackHole(store.acquire(RateLimitKey(scope: .address, name: "echo", subject: address), limit: perAddress, now: 0))
        }
        print("live store holds \(store.count) buckets")
    }
}
