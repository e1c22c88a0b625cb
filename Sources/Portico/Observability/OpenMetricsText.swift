/// Prometheus text (format 0.0.4, as swift-prometheus writes it) made OpenMetrics 1.0 text, the
/// format that carries exemplars: a counter's family is named without its `_total` suffix (its
/// samples keep it), and `untyped` is `unknown`. The caller ends the exposition with `# EOF`.
///
/// Every counter of the gateway's is named `…_total`, as both formats expect of a counter's samples.
enum OpenMetricsText {
    static func converting(_ prometheus: String) -> String {
        var text = ""
        text.reserveCapacity(prometheus.utf8.count)
        for line in prometheus.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
                guard parts.count >= 4 else { continue }
                var name = parts[2]
                let rest = parts[3]
                if line.hasPrefix("# TYPE ") {
                    if rest == "counter", name.hasSuffix("_total") { name = name.dropLast("_total".count) }
                    text += "# TYPE \(name) \(rest == "untyped" ? "unknown" : rest)\n"
                } else {
                    // HELP precedes TYPE: the family's name is only known to be a counter's from its
                    // `_total`, which every counter of ours has and no other family does.
                    if name.hasSuffix("_total") { name = name.dropLast("_total".count) }
                    text += "# HELP \(name) \(rest)\n"
                }
            } else if !line.hasPrefix("#") {
                text += line
                text += "\n"
            }
        }
        return text
    }
}
