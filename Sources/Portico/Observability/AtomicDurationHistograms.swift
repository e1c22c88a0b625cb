import Atomics
import CoreMetrics
import NIOConcurrencyHelpers
import Prometheus

/// Every ``AtomicDurationHistogram`` of one gateway, by name and labels: asking again for the same
/// series (a policy compiled again on reload) returns the same histogram, so it keeps counting.
final class AtomicDurationHistograms: Sendable {
    /// Upper bounds of the buckets, in nanoseconds; a last `+Inf` bucket is implied.
    let bounds: [Int64]
    private let series = NIOLockedValueBox<[String: AtomicDurationHistogram]>([:])

    init(bounds: [Duration]) {
        self.bounds = bounds.map(\.nanoseconds)
    }

    func histogram(name: String, labels: [(String, String)]) -> AtomicDurationHistogram {
        let key = name + "\u{0}" + labels.map { $0.0 + "=" + $0.1 }.joined(separator: "\u{0}")
        return series.withLockedValue { series in
            if let existing = series[key] { return existing }
            let histogram = AtomicDurationHistogram(name: name, labels: labels, bounds: bounds)
            series[key] = histogram
            return histogram
        }
    }

    /// Prometheus text for every histogram, a `# TYPE` line once per name.
    func render(into text: inout String) {
        let all = series.withLockedValue { Array($0.values) }.sorted { ($0.name, $0.labelText) < ($1.name, $1.labelText) }
        var lastName: String?
        for histogram in all {
            if histogram.name != lastName {
                text += "# TYPE \(histogram.name) histogram\n"
                lastName = histogram.name
            }
            histogram.render(into: &text)
        }
    }
}

/// A Prometheus histogram of durations whose record costs three relaxed atomic additions (its
/// bucket, the sum, the count) after a walk of the bucket bounds: no lock. Buckets are stored
/// non-cumulatively and summed when rendered.
final class AtomicDurationHistogram: TimerHandler, Sendable {
    let name: String
    let labels: [(String, String)]
    private let bounds: [Int64]
    /// One per bound, then `+Inf`.
    private let buckets: [ManagedAtomic<Int>]
    private let sumNanoseconds = ManagedAtomic<Int64>(0)

    init(name: String, labels: [(String, String)], bounds: [Int64]) {
        self.name = name
        self.labels = labels
        self.bounds = bounds
        self.buckets = (0...bounds.count).map { _ in ManagedAtomic(0) }
    }

    func recordNanoseconds(_ duration: Int64) {
        var index = 0
        while index < bounds.count && duration > bounds[index] { index += 1 }
        buckets[index].wrappingIncrement(ordering: .relaxed)
        sumNanoseconds.wrappingIncrement(by: max(0, duration), ordering: .relaxed)
    }

    var labelText: String { labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") }

    func render(into text: inout String) {
        let prefix = labels.isEmpty ? "" : labelText + ","
        var cumulative = 0
        for (index, bucket) in buckets.enumerated() {
            cumulative += bucket.load(ordering: .relaxed)
            let bound = index < bounds.count ? String(Double(bounds[index]) / 1e9) : "+Inf"
            text += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(cumulative)\n"
        }
        let braces = labels.isEmpty ? "" : "{\(labelText)}"
        text += "\(name)_sum\(braces) \(Double(sumNanoseconds.load(ordering: .relaxed)) / 1e9)\n"
        // The count is the buckets' total, so the lines of one scrape agree with each other.
        text += "\(name)_count\(braces) \(cumulative)\n"
    }

    /// Label values escaped as the text format requires.
    private static func escape(_ value: String) -> String {
        var escaped = ""
        for character in value {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
