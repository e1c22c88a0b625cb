import Dispatch
import NIOConcurrencyHelpers
import Portico
import PorticoPolicy
import Testing

/// The algorithm on a hand-driven clock: exact counts, no window doubling, exact fractions.
@Suite("GCRA rate limiting")
struct GCRATests {
    static let second: Int64 = 1_000_000_000

    /// Requests at `times` (ns) against one fresh bucket; the admitted ones' times.
    static func admitted(_ limit: GCRALimit, at times: [Int64]) -> [Int64] {
        var state = GCRAState(limit: limit, now: times.first ?? 0)
        return times.filter { state.acquire(now: $0).allowed }
    }

    @Test("50/s with burst 10, 500 requests spread evenly over one second: exactly burst + rate × time")
    func evenlySpread() {
        let limit = GCRALimit(count: 50, periodNanos: Self.second, burst: 10)
        let times = (0..<500).map { Int64($0) * 2_000_000 }  // every 2 ms, the last at 998 ms
        let admitted = Self.admitted(limit, at: times)
        // 10 at once, then one per 20 ms: 0, 20, …, 980 ms after the burst is spent.
        #expect(admitted.count == 10 + 49)
    }

    @Test("no boundary lets twice the rate through: any one-second window holds at most burst + rate")
    func noWindowDoubling() {
        let limit = GCRALimit(count: 100, periodNanos: Self.second, burst: 1)
        // A burst at the end of one second and another at the start of the next.
        let times = (0..<200).map { Int64(900_000_000) + Int64($0) * 1_000_000 }
        let admitted = Self.admitted(limit, at: times)
        for start in admitted {
            let inWindow = admitted.filter { $0 >= start && $0 < start + Self.second }
            #expect(inWindow.count <= 1 + 100)
        }
        #expect(admitted.count == 20)  // 200 ms of arrivals at 100/s, burst 1
    }

    @Test("a rate that does not divide the period (7/min) is kept exactly over a long run")
    func exactFractions() {
        let limit = GCRALimit(count: 7, periodNanos: 60 * Self.second, burst: 1)
        var state = GCRAState(limit: limit, now: 0)
        var admitted = 0
        // One request per millisecond for 60 minutes (3.6 million requests).
        var now: Int64 = 0
        while now < 3600 * Self.second {
            if state.acquire(now: now).allowed { admitted += 1 }
            now += 1_000_000
        }
        #expect(admitted == 7 * 60)
    }

    @Test("remaining, reset and Retry-After say what the next request will get")
    func reportedFigures() {
        let limit = GCRALimit(count: 50, periodNanos: Self.second, burst: 10)
        var state = GCRAState(limit: limit, now: 0)
        let first = state.acquire(now: 0)
        #expect(first == RateLimitDecision(allowed: true, remaining: 9, resetNanos: 20_000_000, retryAfterNanos: 0))
        for _ in 0..<9 { _ = state.acquire(now: 0) }
        let refused = state.acquire(now: 0)
        #expect(refused.allowed == false)
        #expect(refused.remaining == 0)
        #expect(refused.retryAfterNanos == 20_000_000)
        #expect(refused.resetNanos == 200_000_000)
        // Retry-After is honest: just before it, still refused; at it, admitted.
        #expect(state.acquire(now: 19_999_999).allowed == false)
        #expect(state.acquire(now: 20_000_000).allowed == true)
        #expect(state.isIdle(at: 220_000_000))
        #expect(!state.isIdle(at: 219_999_999))
    }

    @Test("a request whose clock reading is older than the bucket's latest is judged at the latest time")
    func staleClockReadings() {
        // A tolerance of 1 ms: a thread preempted for 2 ms between reading the clock and taking the
        // bucket must not be refused because another thread went first.
        let limit = GCRALimit(count: 1_000_000_000, periodNanos: Self.second, burst: 1_000_000)
        var state = GCRAState(limit: limit, now: 0)
        #expect(state.acquire(now: 10_000_000).allowed)
        #expect(state.acquire(now: 8_000_000).allowed)
    }

    @Test("policy rates become the same integers whatever their unit")
    func fromPolicy() {
        #expect(
            GCRALimit(RateLimitPolicy(count: 600, period: .seconds(60), burst: 5))
                == GCRALimit(count: 600, periodNanos: 60 * Self.second, burst: 5))
    }
}

@Suite("The in-memory rate-limit store")
struct InMemoryRateLimitStoreTests {
    static let limit = GCRALimit(count: 50, periodNanos: GCRATests.second, burst: 10)

    @Test("many threads drawing from one bucket at one instant get exactly the burst")
    func contention() {
        let store = InMemoryRateLimitStore()
        let admitted = NIOLockedValueBox(0)
        let key = RateLimitKey(scope: .backend, name: "shared")
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            var mine = 0
            for _ in 0..<1000 where store.acquire(key, limit: Self.limit, now: 42).allowed { mine += 1 }
            admitted.withLockedValue { $0 += mine }
        }
        #expect(admitted.withLockedValue { $0 } == 10)
    }

    @Test("a changed limit starts its bucket afresh; unchanged limits keep their state")
    func reloadSemantics() {
        let store = InMemoryRateLimitStore()
        let gold = RateLimitKey(scope: .tier, name: "gold", service: "s", subject: "a")
        let silver = RateLimitKey(scope: .tier, name: "silver", service: "s", subject: "b")
        for _ in 0..<10 {
            _ = store.acquire(gold, limit: Self.limit, now: 0)
            _ = store.acquire(silver, limit: Self.limit, now: 0)
        }
        #expect(!store.acquire(gold, limit: Self.limit, now: 0).allowed)
        #expect(!store.acquire(silver, limit: Self.limit, now: 0).allowed)
        let newGold = GCRALimit(count: 100, periodNanos: GCRATests.second, burst: 10)
        #expect(store.acquire(gold, limit: newGold, now: 0).allowed)
        #expect(!store.acquire(silver, limit: Self.limit, now: 0).allowed)
    }

    @Test("100,000 distinct client addresses: idle buckets are swept, memory stays bounded")
    func boundedMemory() {
        let store = InMemoryRateLimitStore()
        let perAddress = GCRALimit(count: 10, periodNanos: GCRATests.second, burst: 20)
        var now: Int64 = 0
        var peak = 0
        // 10,000 new addresses a second, one request each: a bucket owes 100 ms, then is idle.
        for index in 0..<100_000 {
            let address = "10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)"
            #expect(store.acquire(RateLimitKey(scope: .address, name: "svc", subject: address), limit: perAddress, now: now).allowed)
            now += 100_000
            if index % 1000 == 0 { peak = max(peak, store.count) }
        }
        // At most one sweep threshold (1,024) per shard, plus what is live: far below 100,000.
        #expect(max(peak, store.count) <= 16 * 1024 + 1_000)
    }

    @Test("at capacity with every bucket live, the store stays within it")
    func capacity() {
        let store = InMemoryRateLimitStore(capacity: 4096, shardCount: 4)
        let slow = GCRALimit(count: 1, periodNanos: 3600 * GCRATests.second, burst: 1)
        for index in 0..<50_000 {
            _ = store.acquire(RateLimitKey(scope: .address, name: "svc", subject: "a\(index)"), limit: slow, now: Int64(index))
        }
        #expect(store.count <= 4096)
        #expect(store.count >= 4096 / 2)
    }
}
