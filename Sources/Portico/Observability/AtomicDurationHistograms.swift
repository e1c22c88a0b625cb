import Atomics
import CoreMetrics
import Foundation
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

    /// Prometheus text for every histogram, a `# TYPE` line once per name; with `openMetrics`,
    /// OpenMetrics text, each bucket with its exemplar if it has one.
    func render(into text: inout String, openMetrics: Bool = false) {
        let all = series.withLockedValue { Array($0.values) }.sorted { ($0.name, $0.labelText) < ($1.name, $1.labelText) }
        var lastName: String?
        for histogram in all {
            if histogram.name != lastName {
                text += "# TYPE \(histogram.name) histogram\n"
                lastName = histogram.name
            }
            histogram.render(into: &text, openMetrics: openMetrics)
        }
    }
}

/// A sampled request's trace, kept beside the bucket its duration fell in (OpenMetrics exemplars):
/// from a slow bucket on a dashboard to one of its traces.
struct Exemplar: Sendable {
    var traceID: Substring
    var spanID: Substring
    var nanoseconds: Int64
    /// Seconds since 1970, when it was recorded.
    var timestamp: Double
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
    /// The latest exemplar of each bucket. Written for sampled requests only, so the lock is
    /// taken by as many requests as the sampler lets through, none on the unsampled path.
    private let exemplars: NIOLockedValueBox<[Exemplar?]>

    init(name: String, labels: [(String, String)], bounds: [Int64]) {
        self.name = name
        self.labels = labels
        self.bounds = bounds
        self.buckets = (0...bounds.count).map { _ in ManagedAtomic(0) }
        self.exemplars = NIOLockedValueBox(Array(repeating: nil, count: bounds.count + 1))
    }

    func recordNanoseconds(_ duration: Int64) {
        record(duration)
    }

    /// Records `duration`, and with `exemplar` (a sampled request's trace) keeps it as its bucket's.
    @discardableResult
    func record(_ duration: Int64, exemplar: (traceID: Substring, spanID: Substring)? = nil) -> Int {
        var index = 0
        while index < bounds.count && duration > bounds[index] { index += 1 }
        buckets[index].wrappingIncrement(ordering: .relaxed)
        sumNanoseconds.wrappingIncrement(by: max(0, duration), ordering: .relaxed)
        if let exemplar {
            let kept = Exemplar(
                traceID: exemplar.traceID, spanID: exemplar.spanID, nanoseconds: duration, timestamp: Date().timeIntervalSince1970)
            exemplars.withLockedValue { $0[index] = kept }
        }
        return index
    }

    var labelText: String { labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") }

    func render(into text: inout String, openMetrics: Bool = false) {
        let prefix = labels.isEmpty ? "" : labelText + ","
        let kept = openMetrics ? exemplars.withLockedValue { $0 } : []
        var cumulative = 0
        for (index, bucket) in buckets.enumerated() {
            cumulative += bucket.load(ordering: .relaxed)
            let bound = index < bounds.count ? String(Double(bounds[index]) / 1e9) : "+Inf"
            text += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(cumulative)"
            if let exemplar = kept.indices.contains(index) ? kept[index] : nil {
                text += " # {trace_id=\"\(exemplar.traceID)\",span_id=\"\(exemplar.spanID)\"} "
                text += "\(Double(exemplar.nanoseconds) / 1e9) \(exemplar.timestamp)"
            }
            text += "\n"
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
