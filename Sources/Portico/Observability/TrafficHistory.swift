import Atomics
import NIOConcurrencyHelpers
import NIOCore

/// What each service and version served over the last 15 minutes, for the console's charts:
/// per 10-second slot, the answers by status class and their durations (to within a fifth).
///
/// Kept in memory, per series a ring of slots reused as time passes, made at the series' first
/// request (about 90 KB). The request path costs two relaxed atomic increments and, once per slot
/// and series, the slot's reset; no lock. A request that ends just as its slot is reset by another
/// event loop may be lost from the count: the charts are a view, not the metrics (`/metrics` counts
/// every request).
///
/// Series outlive policy reloads (a reload is no reason to forget the last minutes); a series whose
/// service or version is gone is dropped at a later reload once it has aged out.
public final class TrafficHistory: Sendable {
    /// How long one slot covers, and how many there are: 90 slots of 10 s, 15 minutes.
    public static let slotSeconds = 10
    public static let slotCount = 90
    private static let slotNanos = Int64(slotSeconds) * 1_000_000_000

    /// Monotonic nanoseconds (tests pass their own).
    private let clock: @Sendable () -> Int64
    private let series = NIOLockedValueBox<[SeriesKey: Series]>([:])

    struct SeriesKey: Hashable {
        var service: String
        var version: String
    }

    public init(clock: @escaping @Sendable () -> Int64 = { Int64(NIODeadline.now().uptimeNanoseconds) }) {
        self.clock = clock
    }

    /// The series for `service` and `version`, made the first time it is asked for: the policy's
    /// compilation asks, once per version, so that requests find theirs by index.
    func series(service: String, version: String) -> Series {
        series.withLockedValue { all in
            let key = SeriesKey(service: service, version: version)
            if let existing = all[key] { return existing }
            let made = Series()
            all[key] = made
            return made
        }
    }

    /// Drops the series not in `kept` that have had no request for 15 minutes (a reload calls it
    /// with the versions of its policy).
    func prune(keeping kept: Set<SeriesKey>) {
        let current = clock() / Self.slotNanos
        series.withLockedValue { all in
            all = all.filter { key, series in kept.contains(key) || !series.isIdle(at: current) }
        }
    }

    /// Counts one answer of `status` that took `nanoseconds` in `series`.
    func record(_ series: Series, status: Int, nanoseconds: Int64) {
        series.record(slot: clock() / Self.slotNanos, status: status, nanoseconds: nanoseconds)
    }

    /// Every series with a request in the last 15 minutes, oldest slot first.
    func snapshot() -> [SeriesView] {
        let current = clock() / Self.slotNanos
        let all = series.withLockedValue { $0 }
        return all.compactMap { key, series in
            let view = series.view(endingAt: current, service: key.service, version: key.version)
            return view.totals.requests > 0 ? view : nil
        }.sorted { ($0.service, $0.version) < ($1.service, $1.version) }
    }

    /// One series as the console draws it.
    struct SeriesView: Encodable {
        struct Totals: Encodable {
            var requests: Int
            var statusClasses: [String: Int]
        }

        var service: String
        var version: String
        /// Requests per slot, oldest first.
        var requests: [Int]
        /// Of those, the 4xx and the 5xx answers.
        var clientErrors: [Int]
        var serverErrors: [Int]
        /// The median and 99th percentile per slot, in milliseconds; nil for a slot without requests.
        var p50Ms: [Double?]
        var p99Ms: [Double?]
        var totals: Totals
    }

    /// One series: its ring, made at its first request.
    final class Series: Sendable {
        /// Durations in buckets of a quarter of a doubling, from 1 µs to about 18 minutes (above: the last).
        static let durationBuckets = 120
        static let countersPerSlot = 5 + durationBuckets

        private let storage = ManagedAtomicLazyReference<Ring>()

        /// Per slot, the slot number it holds now (``Ring/resetting`` while it is being reset), then
        /// its counters (status classes, then duration buckets), in one block of atomics.
        final class Ring: @unchecked Sendable {
            /// A slot's number while one event loop zeroes it: readers take it for empty.
            static let resetting: Int64 = -2
            let epochs: UnsafeMutablePointer<Int64.AtomicRepresentation>
            let counters: UnsafeMutablePointer<Int.AtomicRepresentation>

            init() {
                epochs = .allocate(capacity: TrafficHistory.slotCount)
                epochs.initialize(repeating: .init(-1), count: TrafficHistory.slotCount)
                counters = .allocate(capacity: TrafficHistory.slotCount * Series.countersPerSlot)
                counters.initialize(repeating: .init(0), count: TrafficHistory.slotCount * Series.countersPerSlot)
            }

            deinit {
                epochs.deinitialize(count: TrafficHistory.slotCount)
                epochs.deallocate()
                counters.deinitialize(count: TrafficHistory.slotCount * Series.countersPerSlot)
                counters.deallocate()
            }

            func epoch(_ slot: Int) -> UnsafeAtomic<Int64> { UnsafeAtomic(at: epochs + slot) }

            func counter(slot: Int, _ index: Int) -> UnsafeAtomic<Int> {
                UnsafeAtomic(at: counters + slot * Series.countersPerSlot + index)
            }
        }

        func record(slot number: Int64, status: Int, nanoseconds: Int64) {
            let ring = storage.load() ?? storage.storeIfNilThenLoad(Ring())
            let slot = Int(number % Int64(TrafficHistory.slotCount))
            let epoch = ring.epoch(slot)
            let held = epoch.load(ordering: .acquiring)
            // The first request of a new slot number resets it: readers see it as resetting (empty)
            // until its old counts are gone.
            if held < number, held != Ring.resetting,
                epoch.compareExchange(expected: held, desired: Ring.resetting, ordering: .acquiringAndReleasing).exchanged
            {
                for index in 0..<Self.countersPerSlot { ring.counter(slot: slot, index).store(0, ordering: .relaxed) }
                epoch.store(number, ordering: .releasing)
            }
            ring.counter(slot: slot, min(max(status / 100, 1), 5) - 1).wrappingIncrement(ordering: .relaxed)
            ring.counter(slot: slot, 5 + Self.bucket(nanoseconds: nanoseconds)).wrappingIncrement(ordering: .relaxed)
        }

        /// Whether no slot holds a request of the last 15 minutes (before `current`'s slot number).
        func isIdle(at current: Int64) -> Bool {
            guard let ring = storage.load() else { return true }
            return (0..<TrafficHistory.slotCount).allSatisfy {
                ring.epoch($0).load(ordering: .acquiring) <= current - Int64(TrafficHistory.slotCount)
            }
        }

        /// The bucket of a duration: four per doubling of the microseconds.
        static func bucket(nanoseconds: Int64) -> Int {
            let micros = UInt64(max(nanoseconds, 0) / 1000)
            guard micros >= 1 else { return 0 }
            let octave = 63 - micros.leadingZeroBitCount
            let quarter = octave >= 2 ? Int((micros >> UInt64(octave - 2)) & 3) : Int((micros << UInt64(2 - octave)) & 3)
            return min(octave * 4 + quarter, durationBuckets - 1)
        }

        /// A bucket's upper bound, in milliseconds: what a quantile falling in it is reported as.
        static func upperBoundMilliseconds(bucket: Int) -> Double {
            let octave = bucket / 4, quarter = bucket % 4
            return Double(4 + quarter + 1) * Double(1 << octave) / 4 / 1000
        }

        func view(endingAt current: Int64, service: String, version: String) -> SeriesView {
            var requests: [Int] = []
            var clientErrors: [Int] = []
            var serverErrors: [Int] = []
            var p50: [Double?] = []
            var p99: [Double?] = []
            var classes = [Int](repeating: 0, count: 5)
            requests.reserveCapacity(TrafficHistory.slotCount)
            let ring = storage.load()
            for number in (current - Int64(TrafficHistory.slotCount) + 1)...current {
                let slot = Int(
                    ((number % Int64(TrafficHistory.slotCount)) + Int64(TrafficHistory.slotCount)) % Int64(TrafficHistory.slotCount))
                guard number >= 0, let ring, ring.epoch(slot).load(ordering: .acquiring) == number else {
                    requests.append(0)
                    clientErrors.append(0)
                    serverErrors.append(0)
                    p50.append(nil)
                    p99.append(nil)
                    continue
                }
                var slotClasses = [Int](repeating: 0, count: 5)
                for index in 0..<5 {
                    slotClasses[index] = ring.counter(slot: slot, index).load(ordering: .relaxed)
                    classes[index] += slotClasses[index]
                }
                let statusCount = slotClasses.reduce(0, +)
                clientErrors.append(slotClasses[3])
                serverErrors.append(slotClasses[4])
                let durations = (0..<Self.durationBuckets).map { ring.counter(slot: slot, 5 + $0).load(ordering: .relaxed) }
                requests.append(statusCount)
                p50.append(Self.quantile(0.5, of: durations))
                p99.append(Self.quantile(0.99, of: durations))
            }
            let names = ["1xx", "2xx", "3xx", "4xx", "5xx"]
            return SeriesView(
                service: service, version: version, requests: requests, clientErrors: clientErrors, serverErrors: serverErrors,
                p50Ms: p50, p99Ms: p99,
                totals: .init(
                    requests: classes.reduce(0, +),
                    statusClasses: Dictionary(uniqueKeysWithValues: zip(names, classes))))
        }

        /// The upper bound of the bucket holding the `q` quantile; nil with no durations.
        static func quantile(_ q: Double, of buckets: [Int]) -> Double? {
            let total = buckets.reduce(0, +)
            guard total > 0 else { return nil }
            let rank = max(1, Int((q * Double(total)).rounded(.up)))
            var seen = 0
            for (index, count) in buckets.enumerated() {
                seen += count
                if seen >= rank { return upperBoundMilliseconds(bucket: index) }
            }
            return upperBoundMilliseconds(bucket: buckets.count - 1)
        }
    }
}
