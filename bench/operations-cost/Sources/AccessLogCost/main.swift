// Prints the CPU time (this thread's, CLOCK_THREAD_CPUTIME_ID) per access-log line for each format:
// the record formatted into bytes and queued in the writer, as an event loop does at the end of
// each exchange. The writer's own thread (writing batches to /dev/null) is not counted: it is
// off the request path. Several rounds; the median is printed with the others.
import Foundation
import NIOCore
import PorticoPolicy

@testable import Portico

func threadCPUNanos() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}

let lines = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 1_000_000
let rounds = 5
let devNull = open("/dev/null", O_WRONLY)

// A typical proxied request, every optional field set.
var record = AccessRecord(
    requestID: "0f8fad5bd9cb469fa16570867728950e", method: "GET", path: "/api/2/stockquote/AAPL", client: "203.0.113.7",
    started: .now())
record.service = "stockQuote"
record.version = 2
record.backend = "quotes-csv"
record.keyID = "demo-app"
record.tlsVersion = "TLSv1.3"
record.status = 200
record.bytesSent = 87
record.upstreamDuration = .microseconds(412)
record.upstreamConnects = 0

for format in AccessLogFormat.allCases {
    let writer = AccessLogWriter(format: format, output: devNull, maxBufferedBytes: 64 * 1024 * 1024)
    var perLine: [Double] = []
    for _ in 0..<rounds {
        let start = threadCPUNanos()
        for _ in 0..<lines { writer.write(record) }
        perLine.append(Double(threadCPUNanos() - start) / Double(lines))
        writer.flush()
    }
    writer.shutdown()
    let sorted = perLine.sorted()
    let rendered = perLine.map { String(format: "%.0f", $0) }.joined(separator: " ")
    print(
        "\(format.rawValue): median \(String(format: "%.0f", sorted[rounds / 2])) ns CPU per line (rounds: \(rendered) ns), dropped \(writer.droppedLines)"
    )
}
