import NIOCore
import PorticoPolicy

/// Formats an ``AccessRecord`` as one line of bytes, JSON or logfmt, with no `Foundation`
/// formatter, no dictionary and no intermediate `String`: numbers and the timestamp are written
/// digit by digit into the caller's buffer.
///
/// What a line holds is what the record holds: never a header value, a body or a secret.
struct AccessLogLine {
    let format: AccessLogFormat

    /// Appends the record's line (with its newline) to `out`; `now` is the line's time (also the
    /// end of the exchange, for its total duration).
    func append(_ record: AccessRecord, now: NIODeadline, wallClockNanos: Int64, to out: inout [UInt8]) {
        var writer = FieldWriter(format: format, out: out)
        out = []
        writer.timestamp(wallClockNanos)
        writer.string("request_id", record.requestID)
        writer.string("method", record.method)
        writer.string("path", record.path)
        writer.string("protocol", record.httpProtocol)
        writer.integer("status", Int64(record.status))
        writer.integer("bytes", Int64(record.bytesSent))
        writer.milliseconds("total_ms", (now - record.started).nanoseconds)
        if let client = record.client { writer.string("client", client) }
        if let service = record.service { writer.string("service", service) }
        if let version = record.version { writer.integer("version", Int64(version)) }
        if let backend = record.backend { writer.string("backend", backend) }
        if let source = record.source { writer.string("source", source) }
        if let keyID = record.keyID { writer.string("key", keyID) }
        if let scheme = record.authScheme { writer.string("auth", scheme) }
        if let subject = record.subject { writer.string("subject", subject) }
        if let tls = record.tlsVersion { writer.string("tls", tls) }
        if let subject = record.clientCertificate { writer.string("client_cert", subject) }
        if let upstream = record.upstreamDuration { writer.milliseconds("upstream_ms", TimeAmount(upstream).nanoseconds) }
        if let connects = record.upstreamConnects { writer.integer("upstream_connects", Int64(connects)) }
        if let target = record.target { writer.string("target", target) }
        if let attempts = record.attempts { writer.integer("upstream_attempts", Int64(attempts)) }
        if let failure = record.failure { writer.string("failure", failure) }
        if let received = record.bytesReceived { writer.integer("bytes_in", Int64(received)) }
        if let ending = record.streamEnding { writer.string("stream_end", ending) }
        if let traceID = record.traceID, let spanID = record.spanID {
            writer.string("trace_id", traceID)
            writer.string("span_id", spanID)
        }
        out = writer.finish()
    }
}

/// Writes `key: value` fields in one format. `out` is moved in and out so that appending never
/// copies the buffer.
private struct FieldWriter {
    let format: AccessLogFormat
    var out: [UInt8]
    var first = true

    init(format: AccessLogFormat, out: [UInt8]) {
        self.format = format
        self.out = out
        if format == .json { self.out.append(UInt8(ascii: "{")) }
    }

    mutating func finish() -> [UInt8] {
        if format == .json { out.append(UInt8(ascii: "}")) }
        out.append(UInt8(ascii: "\n"))
        return out
    }

    private mutating func key(_ name: StaticString) {
        if !first { out.append(format == .json ? UInt8(ascii: ",") : UInt8(ascii: " ")) }
        first = false
        let bytes = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        switch format {
        case .json:
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ":"))
        case .logfmt:
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "="))
        }
    }

    mutating func integer(_ name: StaticString, _ value: Int64) {
        key(name)
        appendDecimal(value)
    }

    /// Milliseconds with three decimals (microsecond resolution), as a JSON number.
    mutating func milliseconds(_ name: StaticString, _ nanoseconds: Int64) {
        key(name)
        let micros = max(0, nanoseconds / 1000)
        appendDecimal(micros / 1000)
        out.append(UInt8(ascii: "."))
        appendPadded(micros % 1000, width: 3)
    }

    mutating func string(_ name: StaticString, _ value: some StringProtocol) {
        key(name)
        switch format {
        case .json: appendJSONString(value)
        case .logfmt: appendLogfmtValue(value)
        }
    }

    /// `time` as RFC 3339 UTC with milliseconds: `2026-11-24T02:33:00.123Z`.
    mutating func timestamp(_ wallClockNanos: Int64) {
        key("time")
        if format == .json { out.append(UInt8(ascii: "\"")) }
        let millis = wallClockNanos / 1_000_000
        let seconds = millis / 1000
        let (year, month, day) = Self.civilDate(daysSinceEpoch: seconds / 86_400)
        let secondOfDay = seconds % 86_400
        appendPadded(year, width: 4)
        out.append(UInt8(ascii: "-"))
        appendPadded(month, width: 2)
        out.append(UInt8(ascii: "-"))
        appendPadded(day, width: 2)
        out.append(UInt8(ascii: "T"))
        appendPadded(secondOfDay / 3600, width: 2)
        out.append(UInt8(ascii: ":"))
        appendPadded(secondOfDay / 60 % 60, width: 2)
        out.append(UInt8(ascii: ":"))
        appendPadded(secondOfDay % 60, width: 2)
        out.append(UInt8(ascii: "."))
        appendPadded(millis % 1000, width: 3)
        out.append(UInt8(ascii: "Z"))
        if format == .json { out.append(UInt8(ascii: "\"")) }
    }

    /// Days since 1970-01-01 → proleptic Gregorian (year, month, day); Howard Hinnant's
    /// `civil_from_days`, valid for every date after 1970.
    static func civilDate(daysSinceEpoch days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthPrime = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthPrime + 2) / 5 + 1
        let month = monthPrime < 10 ? monthPrime + 3 : monthPrime - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private mutating func appendDecimal(_ value: Int64) {
        if value < 0 {
            out.append(UInt8(ascii: "-"))
            return appendDecimal(-value)
        }
        if value >= 10 { appendDecimal(value / 10) }
        out.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    private mutating func appendPadded(_ value: Int64, width: Int) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    /// A JSON string: quotes, backslashes and control characters escaped; other bytes as they are
    /// (Swift strings are valid UTF-8). Most values need no escape and are copied in one go.
    private mutating func appendJSONString(_ value: some StringProtocol) {
        out.append(UInt8(ascii: "\""))
        var plain = true
        for byte in value.utf8 where Self.needsJSONEscape(byte) {
            plain = false
            break
        }
        if plain {
            out.append(contentsOf: value.utf8)
        } else {
            for byte in value.utf8 { appendJSONByte(byte) }
        }
        out.append(UInt8(ascii: "\""))
    }

    @inline(__always)
    private static func needsJSONEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private mutating func appendJSONByte(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"):
            out.append(UInt8(ascii: "\\"))
            out.append(byte)
        case 0..<0x20, 0x7F:
            out.append(UInt8(ascii: "\\"))
            out.append(UInt8(ascii: "u"))
            out.append(UInt8(ascii: "0"))
            out.append(UInt8(ascii: "0"))
            out.append(Self.hex[Int(byte >> 4)])
            out.append(Self.hex[Int(byte & 0xF)])
        default: out.append(byte)
        }
    }

    /// A logfmt value: bare when it is only visible characters other than `"`, `=` and `\`;
    /// otherwise quoted, with `"`, `\` and control characters escaped.
    private mutating func appendLogfmtValue(_ value: some StringProtocol) {
        let bare =
            !value.isEmpty
            && value.utf8.allSatisfy {
                $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: "\\")
            }
        guard !bare else { return out.append(contentsOf: value.utf8) }
        appendJSONString(value)
    }
}
